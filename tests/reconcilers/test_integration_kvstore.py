"""End to end on kubesim (3 Nodes in zone-a/b/c) with the engine's workers: a KVStore of 3 replicas upgraded with zero
downtime, ordinals 2, 1, 0, one transition per step, never fewer Ready Pods than its budget (sampled every 100 ms);
a Pod made unready mid-upgrade blocks it (Blocked on record with the reason, a Warning Event) until it is Ready
again, when it resumes by itself; a zone that cannot take the moved ordinal blocks it with the scheduler's reason;
workers killed mid-step leave no step skipped or repeated."""

from __future__ import annotations

import re
import threading

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.kinds.kvstore import BLOCKED, KVSTORE, POD, REPLACING, RUNNING, STATEFULSET
from reconcilers.kinds.kvstore_manifests import selector_labels
from reconcilers.models import Anomaly, AnomalyCategory, Resource, Transition

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVENT = kube.ResourceKind("", "v1", "events", "Event")
NODE = kube.ResourceKind("", "v1", "nodes", "Node", namespaced=False)
READY_SWITCH = "kubesim.io/ready"


def kvstore(namespace, name, image="redis:7.2"):
    return {"apiVersion": "stateful.example.com/v1alpha1", "kind": "KVStore",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 3, "image": image, "minAvailable": 2, "progressDeadlineSeconds": 120}}


def at(uid, phase, generation=None):
    row = Resource.objects.filter(uid=uid).first()
    return bool(row and row.phase == phase and (generation is None or row.generation == generation))


def moved(uid):
    """The ordinals of the steps on record (each step's one transition: into Replacing, reason OrdinalMoved)."""
    rows = Transition.objects.filter(resource_uid=uid, to_phase=REPLACING, reason="OrdinalMoved").order_by("seq")
    return [int(re.match(r"ordinal (\d+)", t.message).group(1)) for t in rows]


def history(uid):
    return [(t.from_phase, t.to_phase, t.reason, t.message[:80])
            for t in Transition.objects.filter(resource_uid=uid).order_by("seq")]


def upgraded(api, namespace, name, uid):
    """The upgrade to generation 2 is through: Running on record after the last ordinal moved, the status says
    partition 0 for generation 2."""
    status = kube.get_object(api, KVSTORE, namespace, name).get("status") or {}
    return (status.get("observedGeneration") == 2 and status.get("phase") == RUNNING and status.get("partition") == 0
            and 0 in moved(uid) and at(uid, RUNNING))


def pods(api, namespace, name):
    selector = ",".join(f"{k}={v}" for k, v in sorted(selector_labels(name).items()))
    return kube.list_objects(api, POD, namespace, label_selector=selector).items


def ready_count(items):
    return sum(1 for p in items if not p["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (p.get("status") or {}).get("conditions") or []))


class Sampler(threading.Thread):
    """Counts the Ready Pods every 100 ms until stopped."""

    def __init__(self, api, namespace, name):
        super().__init__(daemon=True)
        self.args, self.samples, self.halt = (api, namespace, name), [], threading.Event()

    def run(self):
        while not self.halt.wait(0.1):
            self.samples.append(ready_count(pods(*self.args)))


def set_ready_switch(api, namespace, pod, value):
    kube.patch_object(api, POD, namespace, pod, {"metadata": {"annotations": {READY_SWITCH: value}}})


def running_kvstore(api, namespace, name, **spec):
    body = kvstore(namespace, name)
    body["spec"].update(spec)
    uid = kube.create_object(api, KVSTORE, body)["metadata"]["uid"]
    wait_for(lambda: at(uid, RUNNING), timeout=60, interval=0.1)
    return uid


def test_an_upgrade_of_3_replicas_across_3_zones_keeps_the_budget_and_moves_2_1_0(integration, kapi, namespace):
    uid = running_kvstore(kapi, namespace, "kv")
    zones_before = {p["spec"]["nodeName"] for p in pods(kapi, namespace, "kv")}
    assert len(zones_before) == 3  # one Pod per zone's Node: the spread
    sampler = Sampler(kapi, namespace, "kv")
    sampler.start()
    try:
        kube.patch_object(kapi, KVSTORE, namespace, "kv", {"spec": {"image": "redis:7.4"}})
        wait_for(lambda: upgraded(kapi, namespace, "kv", uid), timeout=90, interval=0.1)
    finally:
        sampler.halt.set()
        sampler.join(5)
    assert len(sampler.samples) >= 3  # the upgrade took several 100 ms samples
    assert min(sampler.samples) >= 2, sampler.samples
    assert moved(uid) == [2, 1, 0]
    live = pods(kapi, namespace, "kv")
    assert {p["spec"]["containers"][0]["image"] for p in live} == {"redis:7.4"}
    assert len({p["spec"]["nodeName"] for p in live}) == 3
    status = kube.get_object(kapi, KVSTORE, namespace, "kv")["status"]
    assert status["partition"] == 0 and [o["ordinal"] for o in status["ordinals"]] == [0, 1, 2]
    assert {o["zone"] for o in status["ordinals"]} == {"zone-a", "zone-b", "zone-c"}


def test_a_pod_made_unready_mid_upgrade_blocks_it_until_it_is_ready_again(integration, kapi, namespace):
    uid = running_kvstore(kapi, namespace, "kvb")
    kube.patch_object(kapi, KVSTORE, namespace, "kvb", {"spec": {"image": "redis:7.4"}})
    wait_for(lambda: moved(uid)[:1] == [2], timeout=60, interval=0.05)
    set_ready_switch(kapi, namespace, "kvb-0", "false")  # below the partition until the last step
    try:
        wait_for(lambda: at(uid, BLOCKED), timeout=60, interval=0.1)
    except AssertionError:
        raise AssertionError(history(uid)) from None
    blocked = Transition.objects.filter(resource_uid=uid, to_phase=BLOCKED).order_by("seq").first()
    assert blocked.reason == "BudgetExhausted" and "not Ready: kvb-0" in blocked.message

    def warning():
        return [e for e in kube.list_objects(kapi, EVENT, namespace).items
                if e.get("type") == "Warning" and e.get("reason") == "BudgetExhausted"
                and (e.get("involvedObject") or {}).get("uid") == uid]

    assert wait_for(warning, timeout=30, interval=0.2)
    assert 0 not in moved(uid)
    set_ready_switch(kapi, namespace, "kvb-0", None)
    wait_for(lambda: upgraded(kapi, namespace, "kvb", uid), timeout=90, interval=0.1)
    assert moved(uid) == [2, 1, 0]


def test_a_zone_that_cannot_take_the_moved_ordinal_blocks_with_the_schedulers_reason(integration, kapi, namespace):
    uid = running_kvstore(kapi, namespace, "kvz", zoneSpread={"maxSkew": 1, "minDomains": 3})
    node = next(p for p in pods(kapi, namespace, "kvz") if p["metadata"]["name"] == "kvz-2")["spec"]["nodeName"]
    kube.patch_object(kapi, NODE, None, node, {"spec": {"unschedulable": True}})  # its zone takes no new Pod
    try:
        kube.patch_object(kapi, KVSTORE, namespace, "kvz", {"spec": {"image": "redis:7.4"}})
        try:
            wait_for(lambda: at(uid, BLOCKED), timeout=60, interval=0.1)
        except AssertionError:
            raise AssertionError(history(uid)) from None
        blocked = Transition.objects.filter(resource_uid=uid, to_phase=BLOCKED).order_by("seq").first()
        assert blocked.reason == "SpreadUnsatisfiable"
        assert "kvz-2 cannot be scheduled" in blocked.message
        assert "didn't match pod topology spread constraints" in blocked.message
        live = [p for p in pods(kapi, namespace, "kvz") if p["spec"].get("nodeName")]
        assert len({p["spec"]["nodeName"] for p in live}) == len(live)  # nothing packed into the zones left
    finally:
        kube.patch_object(kapi, NODE, None, node, {"spec": {"unschedulable": False}})
    wait_for(lambda: upgraded(kapi, namespace, "kvz", uid), timeout=90, interval=0.1)
    assert moved(uid) == [2, 1, 0]


def test_workers_killed_mid_upgrade_resume_from_the_partition_without_skipping_or_repeating_a_step(
        integration, kapi, namespace):
    """Every worker is SIGKILLed the moment the step moving ordinal 1 reaches the StatefulSet, wherever its run is:
    before its status write (the next run finds the partition moved and records that step), after it (the engine
    catches the written phase up from its note), or in between the write and the note, where the engine cannot
    prove the phase its own and keeps it as an out-of-band change (never a transition it cannot prove). In every
    case no step is on record twice, none is skipped, and the replacements finish the upgrade."""
    uid = running_kvstore(kapi, namespace, "kvk")

    def partition():
        sts = kube.get_object(kapi, STATEFULSET, namespace, "kvk") or {}
        return ((sts.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate", {}).get("partition")

    kube.patch_object(kapi, KVSTORE, namespace, "kvk", {"spec": {"image": "redis:7.4"}})
    wait_for(lambda: partition() == 1, timeout=60, interval=0.005)
    victims = list(integration.workers)
    for worker in victims:
        worker.kill()
    for worker in victims:  # their replacements, as Engine.replace makes one (which waits for all to be alive)
        worker.stop()
        integration.workers.remove(worker)
        integration.start_worker(f"{worker.name}r")
    integration.wait_workers()
    wait_for(lambda: upgraded(kapi, namespace, "kvk", uid), timeout=90, interval=0.1)
    steps = moved(uid)
    unproven = [int(re.match(r"ordinal (\d+)", a.message).group(1)) for a in Anomaly.objects.filter(
        resource__uid=uid, category=AnomalyCategory.OUT_OF_BAND, to_phase=REPLACING, reason="OrdinalMoved")]
    trail = "\n".join(map(str, history(uid)))
    assert steps == sorted(set(steps), reverse=True), trail  # in order, none twice
    assert set(steps) | set(unproven) == {0, 1, 2} and set(unproven) <= {1}, (trail, unproven)
    assert {p["spec"]["containers"][0]["image"] for p in pods(kapi, namespace, "kvk")} == {"redis:7.4"}
