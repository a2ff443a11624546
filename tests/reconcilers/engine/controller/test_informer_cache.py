"""What the controller's informer caches hold, against a real kubesim (issue 40): the reconciled and owned objects
without managedFields and the last-applied annotation, a stub of each Event, the uid index of the reconciled kind
only; while the object cache still gets every object whole, the archive is still told whose child each owned
object is and gets each Event's previous count, and a child's change of managedFields and kubectl's last-applied
record alone enqueues no owner."""

from __future__ import annotations

import json
import threading
import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller.informers import EVENTS
from reconcilers.engine.controller.kindmap import kind_id
from reconcilers.engine.controller.slim import LAST_APPLIED
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import CONFIGMAP, WIDGET, WidgetReconciler, widget


class ConfigMapWidget(WidgetReconciler):
    """A Widget that owns ConfigMaps (no controller in kubesim changes them)."""

    owns = (CONFIGMAP,)


class Archive:
    """An events writer with the resolver the archive tells whose child each owned object is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pairs: list[tuple[dict, dict | None]] = []
        self.resolver = self
        self.owners: dict[str, str] = {}

    def __call__(self, batch):
        with self.lock:
            self.pairs.extend(batch)
        return len(batch)

    def remember(self, uid, owner_uid):
        with self.lock:
            self.owners[uid] = owner_uid

    def previous(self, uid, count):
        """The previous state handed with the Event `uid` at `count`."""
        with self.lock:
            return [old for event, old in self.pairs
                    if event["metadata"]["uid"] == uid and event.get("count") == count]


class Recorded:
    """The fake enqueue and object cache writer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.keys: list[str] = []
        self.objects: dict[str, dict | None] = {}

    def enqueue(self, key):
        with self.lock:
            self.keys.append(key)
        return True

    def cache_write(self, objects):
        with self.lock:
            self.objects.update(objects)

    def take(self):
        with self.lock:
            keys, self.keys = self.keys, []
        return keys


@pytest.fixture
def controller(api, widget_kind, settings):
    settings.OPSCONSOLE_WORKQUEUE_NAME = "test-informer-cache"
    archive, recorded = Archive(), Recorded()
    ctl = build_controller(api, [ConfigMapWidget()], enqueue=recorded.enqueue, pump=lambda: 0, mirror=False,
                           archive_events=True, events_write=archive, heal_interval=0, checkpoint_seconds=0,
                           queue_depths=lambda: {}, object_cache=True, cache_write=recorded.cache_write,
                           cache_prune=lambda prefix, present: None, cache_live=lambda ttl: None)
    ctl.step()  # leads (no elector): starts the informers
    assert ctl.wait_synced(10)
    yield ctl, archive, recorded
    ctl.shutdown()


def drive_until(ctl, predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not ctl.step():
            ctl.handoff.wait(0.02)
        if predicate():
            return
    raise AssertionError("condition not met while driving the controller")


def delivered(informer, obj):
    """Whether the informer's watch has handled the write that made `obj` (its handler included)."""
    return int(informer.resource_version or 0) >= int(obj["metadata"]["resourceVersion"])


def configmap(name, ns, owner, **data):
    ref = {"apiVersion": WIDGET.api_version, "kind": WIDGET.kind, "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": data,
            "metadata": {"name": name, "namespace": ns, "ownerReferences": [ref]}}


def kube_event(name, ns, about, count):
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": ns,
                               "name": about["metadata"]["name"], "uid": about["metadata"]["uid"]},
            "reason": "Tested", "message": "a message the stub does not keep", "type": "Normal", "count": count,
            "source": {"component": "test"}}


def applied_with_kubectl(obj):
    """`obj` as kubectl's client-side apply sends it: the whole object in the last-applied annotation."""
    meta = obj["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), LAST_APPLIED: json.dumps(obj)}
    return obj


def test_the_caches_keep_slim_objects_and_event_stubs_while_handlers_get_them_whole(api, ns, controller):
    ctl, archive, recorded = controller
    owner = kube.create_object(api, WIDGET, applied_with_kubectl(widget("w", ns)))
    child = kube.create_object(api, CONFIGMAP, applied_with_kubectl(configmap("c", ns, owner, k="v")))
    event = kube.create_object(api, EVENTS, kube_event("c.1", ns, child, 1), namespace=ns)
    wkey, ckey = WIDGET.request(ns, "w").key(), CONFIGMAP.request(ns, "c").key()
    ekey = EVENTS.request(ns, "c.1").key()
    drive_until(ctl, lambda: ckey in recorded.objects and archive.previous(event["metadata"]["uid"], 1))

    widgets, children = ctl.informers[kind_id(WIDGET)], ctl.informers[kind_id(CONFIGMAP)]
    for informer, key, live in ((widgets, wkey, owner), (children, ckey, child)):
        cached = informer.get(key)
        assert live["metadata"]["managedFields"] and LAST_APPLIED in live["metadata"]["annotations"]
        assert "managedFields" not in cached["metadata"] and "annotations" not in cached["metadata"]
        for field in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp"):
            assert cached["metadata"][field] == live["metadata"][field]
        assert {k: v for k, v in cached.items() if k != "metadata"} == {
            k: v for k, v in live.items() if k != "metadata"}
    # the object cache the runner reads gets the reconciled object whole (provenance reads its managedFields), a
    # child slim (its entry is read only to tell whether an apply would change anything)
    assert recorded.objects[wkey]["metadata"]["managedFields"]
    assert LAST_APPLIED in recorded.objects[wkey]["metadata"]["annotations"]
    assert recorded.objects[ckey] == children.get(ckey)
    assert children.get(ckey)["metadata"]["ownerReferences"] == child["metadata"]["ownerReferences"]

    assert ctl.informer_set.events_informer.get(ekey) == {
        "metadata": {"name": "c.1", "namespace": ns, "uid": event["metadata"]["uid"],
                     "resourceVersion": event["metadata"]["resourceVersion"]}, "count": 1}
    # the uid index only where the owner lookups and the sweep read it
    assert widgets.key_for_uid(owner["metadata"]["uid"]) == wkey
    assert children.uids() == set() and ctl.informer_set.events_informer.uids() == set()

    # the archive: told whose child the ConfigMap is, given the Event whole, and its previous count on an update
    assert archive.owners[child["metadata"]["uid"]] == owner["metadata"]["uid"]
    assert archive.previous(event["metadata"]["uid"], 1)[0] is None
    kube.patch_object(api, EVENTS, ns, "c.1", {"count": 2})
    drive_until(ctl, lambda: archive.previous(event["metadata"]["uid"], 2))
    old = archive.previous(event["metadata"]["uid"], 2)[0]
    assert old["count"] == 1 and old["metadata"]["uid"] == event["metadata"]["uid"]
    with archive.lock:
        whole = [e for e, _old in archive.pairs if e.get("count") == 2][0]
    assert whole["message"] == "a message the stub does not keep" and whole["involvedObject"]["name"] == "c"


def test_a_child_s_change_of_its_last_applied_record_alone_enqueues_no_owner_but_a_real_change_does(
    api, ns, controller
):
    ctl, _archive, recorded = controller
    owner = kube.create_object(api, WIDGET, widget("w", ns))
    created = kube.create_object(api, CONFIGMAP, configmap("c", ns, owner, k="v"))
    wkey, ckey = WIDGET.request(ns, "w").key(), CONFIGMAP.request(ns, "c").key()
    children = ctl.informers[kind_id(CONFIGMAP)]
    drive_until(ctl, lambda: delivered(children, created) and wkey in recorded.keys)
    drive_until(ctl, lambda: ctl.handoff.pending() == (0, 0))
    recorded.take()

    # kubectl's record of an apply changes, and with it managedFields (another manager wrote it): nothing else
    same = kube.patch_object(api, CONFIGMAP, ns, "c", {"metadata": {"annotations": {LAST_APPLIED: '{"data": {}}'}}},
                             field_manager="kubectl-client-side-apply")
    assert "kubectl-client-side-apply" in {m["manager"] for m in same["metadata"]["managedFields"]}
    wait_for(lambda: delivered(children, same), timeout=5)
    assert children.get(ckey)["metadata"]["resourceVersion"] == same["metadata"]["resourceVersion"]
    drive_until(ctl, lambda: ctl.handoff.pending() == (0, 0))
    assert wkey not in recorded.take()

    kube.patch_object(api, CONFIGMAP, ns, "c", {"data": {"k": "changed"}})
    drive_until(ctl, lambda: wkey in recorded.keys)
