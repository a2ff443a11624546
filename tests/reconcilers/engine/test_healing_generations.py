"""Issue 38: evidence belongs to a generation and is corroborated. Attribution at archive time (the object itself,
Pod → ReplicaSet → Deployment → Memcached, a revision that is not the current one, unattributed), the rules
counting only the current generation's evidence, supersession on record, resolved rules, corroboration by the
Pods' own state, and the attacks: a forged Event during a legitimate change rolls nothing back; an Event written in
one namespace with another namespace's uid is not filed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from reconcilers.core.meta import AUTO_ROLLBACK
from reconcilers.engine import metrics
from reconcilers.engine.healing import rollback, rules
from reconcilers.engine.healing.archive import ObjectRef, OwnerResolver, events_archive
from reconcilers.engine.healing.corroborate import corroborate
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.models import HealingAction, HealingRecord, KubeEvent, Resource, Transition
from tests.reconcilers.engine.generations_support import revision_at

pytestmark = pytest.mark.django_db

NS = "shop"
GOOD = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "m", "image": "memcached:1.6"}]}}
BROKEN = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "m", "image": "memcached:nope"}]}}


def _ref(kind: str, name: str, uid: str, api_version: str = "apps/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}


def _rs(uid: str, template: dict[str, Any]) -> dict[str, Any]:
    tmpl = {**template, "metadata": {"labels": {**template["metadata"]["labels"], "pod-template-hash": uid}}}
    return {"kind": "ReplicaSet", "metadata": {"uid": uid, "name": f"web-{uid}", "namespace": NS,
                                               "ownerReferences": [_ref("Deployment", "web", "dep-1")]},
            "spec": {"template": tmpl}}


def _pod(uid: str, rs: str, *, waiting: str | None = None, restarts: int = 0) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {"kind": "Pod", "metadata": {"uid": uid, "name": uid, "namespace": NS,
                                        "ownerReferences": [_ref("ReplicaSet", f"web-{rs}", rs)]},
            "status": {"containerStatuses": [{"name": "m", "state": state, "restartCount": restarts}]}}


class Cluster:
    """Objects by uid for the resolver's `get`, counting reads; `deployment` is the Deployment as it is now."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            "rs-old": _rs("rs-old", GOOD), "rs-new": _rs("rs-new", BROKEN),
            "pod-old": _pod("pod-old", "rs-old"), "pod-new": _pod("pod-new", "rs-new", waiting="ImagePullBackOff"),
            "dep-1": self.deployment(BROKEN),
            "cm-1": {"metadata": {"uid": "cm-1", "ownerReferences": [_ref("Secret", "s", "sec-1", "v1")]}},
            "sec-1": {"metadata": {"uid": "sec-1", "ownerReferences": [_ref("Deployment", "web", "dep-1")]}},
        }
        self.reads: list[str] = []

    @staticmethod
    def deployment(template: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "Deployment", "metadata": {"uid": "dep-1", "name": "web", "namespace": NS, "ownerReferences": [
            _ref("Memcached", "web", "mc-1", "cache.example.com/v1alpha1")]}, "spec": {"template": template}}

    def __call__(self, ref: ObjectRef) -> dict[str, Any] | None:
        self.reads.append(ref.uid)
        return self.objects.get(ref.uid)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(name)


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


@pytest.fixture
def resolver(cluster) -> OwnerResolver:
    return OwnerResolver(None, get=cluster)


@pytest.fixture
def memcached(db) -> Resource:
    """Generation 2 (the broken image), reconciled; generation 1's revision 60 s ago, generation 2's 10 s ago."""
    row = Resource.objects.create(uid="mc-1", key=f"cache.example.com/v1alpha1/memcacheds/{NS}/web",
                                  group="cache.example.com", version="v1alpha1", plural="memcacheds",
                                  kind="Memcached", namespace=NS, name="web", generation=2, observed_generation=2,
                                  phase="Pending", phase_since=timezone.now() - timedelta(seconds=10))
    revision_at("mc-1", 1, timezone.now() - timedelta(seconds=60))
    revision_at("mc-1", 2, timezone.now() - timedelta(seconds=10))
    return row


def event(uid: str, involved: tuple[str, str, str], *, count: int = 1, reason: str = "Failed",
          namespace: str = NS, api_version: str = "v1") -> dict[str, Any]:
    kind, name, involved_uid = involved
    return {"metadata": {"uid": uid, "name": f"{name}.{uid}", "namespace": namespace},
            "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace,
                               "uid": involved_uid},
            "type": "Warning", "reason": reason, "message": "Error: ImagePullBackOff", "count": count,
            "lastTimestamp": timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ"), "source": {"component": "kubelet"}}


POD_NEW = ("Pod", "pod-new", "pod-new")
POD_OLD = ("Pod", "pod-old", "pod-old")


def _archived(uid: str) -> tuple[int | None, str]:
    row = KubeEvent.objects.get(event_uid=uid)
    return row.generation, row.attribution


def _evaluator(api: Any = None, annotations: dict[str, Any] | None = None) -> Evaluator:
    return Evaluator(api, [MemcachedReconciler()], annotations=lambda _rec, _res: dict(annotations or {}),
                     enqueue=lambda keys: None)


# -- attribution at archive time ----------------------------------------------------------------------------------


def test_an_event_about_the_object_itself_is_its_observed_generation(memcached, resolver) -> None:
    events_archive([(event("e-self", ("Memcached", "web", "mc-1"), api_version="cache.example.com/v1alpha1"), None)],
                   resolver)
    assert _archived("e-self") == (2, "self")


def test_a_pod_is_attributed_through_its_replicaset_to_the_generation_whose_template_the_deployment_runs(
        memcached, resolver, cluster) -> None:
    events_archive([(event("e-new", POD_NEW), None)], resolver)
    assert _archived("e-new") == (2, "replicaset")
    assert cluster.reads == ["pod-new", "rs-new", "dep-1", "dep-1"]  # the walk, then the Deployment as it is now
    events_archive([(event("e-new", POD_NEW, count=2), None), (event("e-rs", ("ReplicaSet", "web-rs-new", "rs-new"),
                                                                      api_version="apps/v1"), None)], resolver)
    assert cluster.reads == ["pod-new", "rs-new", "dep-1", "dep-1"]  # steady state: no API call per Event
    assert _archived("e-rs") == (2, "replicaset")


def test_a_pod_of_an_older_revision_is_never_evidence_about_the_current_generation(memcached, resolver) -> None:
    """The old ReplicaSet's Pod still failing (or forged about) while generation 2 runs: not generation 2's."""
    events_archive([(event("e-old", POD_OLD), None)], resolver)
    assert _archived("e-old") == (None, "revision-not-current")


def test_a_generation_written_but_not_reconciled_yet_gets_none_of_the_evidence(memcached, resolver, cluster) -> None:
    """Ambiguity: generation 3 is written, its run has not applied its children. The Deployment may run either
    template: what is archived now is filed under the generation observed (2), never under 3."""
    Resource.objects.filter(pk=memcached.pk).update(generation=3)
    cluster.objects["dep-1"] = Cluster.deployment(GOOD)  # even if generation 3's run already applied it
    events_archive([(event("e-a", POD_NEW), None), (event("e-b", POD_OLD), None),
                    (event("e-c", ("Deployment", "web", "dep-1"), api_version="apps/v1"), None)], resolver)
    assert _archived("e-a") == (None, "revision-not-current")
    assert _archived("e-b") == (2, "replicaset")  # the newer revision's, under the older generation: safe
    assert _archived("e-c") == (None, "child-unsettled")


def test_unattributable_evidence_is_null_and_says_why(memcached, resolver) -> None:
    events_archive([(event("e-deep", ("ConfigMap", "c", "cm-1")), None)], resolver)
    assert _archived("e-deep") == (None, "no-revision")
    Resource.objects.filter(pk=memcached.pk).update(observed_generation=None)
    events_archive([(event("e-unobserved", POD_NEW), None)], resolver)
    assert _archived("e-unobserved") == (None, "unobserved")


def test_an_event_with_another_namespaces_uid_is_not_filed(memcached, resolver) -> None:
    """Attack (c): written in `intruder`, naming `intruder` as its involved object's namespace (so the legacy
    namespace rule passes) but carrying the uid of `shop`'s Deployment (known to the resolver) or Memcached."""
    events_archive([(event("own", ("Deployment", "web", "dep-1"), api_version="apps/v1"), None)], resolver)
    assert events_archive([(event("x-dep", ("Deployment", "web", "dep-1"), namespace="intruder",
                                  api_version="apps/v1"), None),
                           (event("x-mc", ("Memcached", "web", "mc-1"), namespace="intruder",
                                  api_version="cache.example.com/v1alpha1"), None)], resolver) == 0
    assert list(KubeEvent.objects.values_list("event_uid", flat=True)) == ["own"]


# -- the rules count only the current generation's evidence ------------------------------------------------------


def _kube_event(uid: str, generation: int | None, *, observed: Any = None, occurrences: int = 1,
                involved: tuple[str, str, str] = POD_NEW) -> None:
    when = observed or timezone.now()
    KubeEvent.objects.create(resource=Resource.objects.get(uid="mc-1"), event_uid=uid, count=1,
                             occurrences=occurrences, namespace=NS, name=f"{uid}.x", type="Warning", reason="Failed",
                             involved_kind=involved[0], involved_name=involved[1], involved_uid=involved[2],
                             involved_namespace=NS, last_timestamp=when, observed_at=when, generation=generation,
                             attribution="replicaset" if generation else "revision-not-current")


def test_events_of_another_generation_or_before_it_was_applied_or_unattributed_do_not_count(memcached) -> None:
    _kube_event("g1", 1, occurrences=5)
    _kube_event("none", None, occurrences=5)
    _kube_event("early", 2, occurrences=5, observed=timezone.now() - timedelta(seconds=20))  # before gen 2 applied
    _kube_event("g2", 2, occurrences=2)
    assert _evaluator().step().detected == 0
    _kube_event("g2b", 2)
    assert _evaluator().step().detected == 1
    detected = HealingRecord.objects.get(action=HealingAction.ANOMALY_DETECTED)
    assert detected.detail["generation"] == 2 and detected.detail["occurrences"] == 3
    assert sorted(e["event_uid"] for e in detected.detail["events"]) == ["g2", "g2b"]
    assert {e["involved_name"] for e in detected.detail["events"]} == {"pod-new"}
    entry = Resource.objects.get(uid="mc-1").active_anomalies["backoff"]
    assert entry["generation"] == 2
    assert (entry["rollback_ok"], entry["why_not"]) == (False, "not corroborated: the Pods could not be read "
                                                                "(no API client)")


def test_flapping_counts_only_the_current_generations_transitions(memcached) -> None:
    rid = memcached.pk
    for i, generation in enumerate((1, 1, 1, 2, 2, 2)):
        Transition.objects.create(resource_id=rid, resource_uid="mc-1", kind="Memcached", namespace=NS, name="web",
                                  seq=i + 1, from_phase="Running", to_phase="Degraded", generation=generation,
                                  hash=f"h{i}", created_at=timezone.now())
    assert _evaluator().step().detected == 0  # 3 of generation 1, 3 of generation 2: neither reaches 4


def test_an_anomaly_is_superseded_when_the_generation_moves_on_and_rollback_failed_is_left_alone(memcached) -> None:
    for uid in ("a", "b", "c"):
        _kube_event(uid, 2)
    assert _evaluator().step().detected == 1
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=memcached.pk)
        rollback.anomaly_raise_locked(row, metrics.ROLLBACK_FAILED_RULE, "escalated", timezone.now())
        row.generation = row.observed_generation = 3
        row.save()
    revision_at("mc-1", 3, timezone.now())
    report = _evaluator().step()
    assert (report.cleared, report.detected) == (1, 0)  # generation 3 starts from zero
    cleared = HealingRecord.objects.get(action=HealingAction.ANOMALY_CLEARED)
    assert (cleared.rule, cleared.reason, cleared.generation) == ("backoff", "superseded by generation 3", 3)
    assert set(Resource.objects.get(pk=memcached.pk).active_anomalies) == {metrics.ROLLBACK_FAILED_RULE}


def test_a_rule_resolved_for_the_current_generation_is_not_raised_again_for_it(memcached) -> None:
    Resource.objects.filter(pk=memcached.pk).update(anomalies_resolved={"backoff": {"generation": 2, "record": 1}})
    for uid in ("a", "b", "c"):
        _kube_event(uid, 2)
    assert _evaluator().step().detected == 0
    Resource.objects.filter(pk=memcached.pk).update(anomalies_resolved={"backoff": {"generation": 1, "record": 1}})
    assert _evaluator().step().detected == 1


# -- corroboration -------------------------------------------------------------------------------------------------


def _rows(*pods: str) -> list[dict[str, Any]]:
    return [{"involved_kind": "Pod", "involved_namespace": NS, "involved_name": p, "involved_uid": p} for p in pods]


def test_a_pod_waiting_in_image_pull_back_off_corroborates(cluster) -> None:
    found = corroborate(_rows("pod-new"), cluster.pod)
    assert found["corroborated"] is True and found["pods"][0]["waiting"] == ["ImagePullBackOff"]


def test_a_running_pod_a_gone_pod_or_no_pod_does_not_corroborate(cluster) -> None:
    assert corroborate(_rows("pod-old"), cluster.pod)["corroborated"] is False
    assert corroborate(_rows("pod-gone"), cluster.pod)["pods"] == [{"name": "pod-gone", "uid": "pod-gone",
                                                                    "found": False}]
    assert corroborate([{"involved_kind": "Deployment", "involved_uid": "dep-1"}], cluster.pod)["why"] == (
        "no Pod among the counted Events")


def test_a_rising_restart_count_corroborates(cluster) -> None:
    cluster.objects["pod-old"] = _pod("pod-old", "rs-old", restarts=2)
    assert corroborate(_rows("pod-old"), cluster.pod, {"pod-old": 2})["corroborated"] is False
    cluster.objects["pod-old"] = _pod("pod-old", "rs-old", restarts=3)
    assert corroborate(_rows("pod-old"), cluster.pod, {"pod-old": 2})["corroborated"] is True


def test_a_corroborated_anomaly_may_roll_back_and_an_uncorroborated_one_is_judged_again_when_it_grows(
        memcached, cluster, monkeypatch) -> None:
    monkeypatch.setattr(rules, "pod_reader", lambda api: cluster.pod)
    cluster.objects["pod-new"] = _pod("pod-new", "rs-new")  # running, for now
    for uid in ("a", "b", "c"):
        _kube_event(uid, 2)
    assert _evaluator(api=object()).step().detected == 1
    assert Resource.objects.get(pk=memcached.pk).active_anomalies["backoff"]["rollback_ok"] is False
    assert _evaluator(api=object()).step().detected == 0  # nothing new: not judged again
    cluster.objects["pod-new"] = _pod("pod-new", "rs-new", waiting="CrashLoopBackOff")
    _kube_event("d", 2)
    report = _evaluator(api=object()).step()
    assert (report.cleared, report.detected) == (1, 1)
    entry = Resource.objects.get(pk=memcached.pk).active_anomalies["backoff"]
    assert (entry["generation"], entry["rollback_ok"], entry["why_not"]) == (2, True, "")
    latest = HealingRecord.objects.filter(action=HealingAction.ANOMALY_DETECTED).order_by("-seq").first()
    assert latest.detail["corroboration"]["pods"][0]["waiting"] == ["CrashLoopBackOff"]


# -- attack (b): a forged Event during a legitimate change ---------------------------------------------------------


def forged(uid: str, involved: tuple[str, str, str]) -> dict[str, Any]:
    made = event(uid, involved, count=1000000, reason="BackOff")
    made["firstTimestamp"] = made["lastTimestamp"] = "2099-01-01T00:00:00Z"
    return made


def test_forged_events_during_a_legitimate_change_roll_nothing_back(memcached, resolver, cluster,
                                                                    monkeypatch) -> None:
    """Generation 2 is a legitimate change (the Deployment runs a good template; its Pod runs). Forged Events with
    `count: 1000000` and `lastTimestamp: 2099-01-01`, about its Pod and about its Deployment, raise the anomaly at
    most: nothing of the children's state corroborates it, so the automatic path, which is on, rolls nothing
    back."""
    cluster.objects["rs-new"] = _rs("rs-new", GOOD)
    cluster.objects["rs-old"] = _rs("rs-old", BROKEN)
    cluster.objects["dep-1"] = Cluster.deployment(GOOD)
    cluster.objects["pod-new"] = _pod("pod-new", "rs-new")
    monkeypatch.setattr(rules, "pod_reader", lambda api: cluster.pod)
    Transition.objects.create(resource_id=memcached.pk, resource_uid="mc-1", kind="Memcached", namespace=NS,
                              name="web", seq=1, from_phase="Pending", to_phase="Running", generation=1, hash="h1")
    writes: list[Any] = []
    monkeypatch.setattr(rollback.kube, "request_json", lambda *a, **k: writes.append(a) or {})
    Resource.objects.filter(pk=memcached.pk).update(phase="Pending")
    events_archive([(forged("f1", POD_NEW), None), (forged("f2", POD_NEW), None),
                    (forged("f3", ("Deployment", "web", "dep-1")), None)], resolver)
    assert sorted(KubeEvent.objects.values_list("generation", flat=True)) == [2, 2, 2]
    evaluator = _evaluator(api=object(), annotations={AUTO_ROLLBACK: "true"})
    evaluator.step()
    evaluator.step()
    resource = Resource.objects.get(pk=memcached.pk)
    entry = resource.active_anomalies["backoff"]
    assert (entry["rollback_ok"], entry["why_not"].startswith("not corroborated")) == (False, True)
    assert not HealingRecord.objects.filter(action=HealingAction.ROLLBACK_STARTED).exists()
    assert writes == [] and resource.rollback is None


# -- attack (a): a valid change while the older generation's anomaly is inside its window ---------------------------


def test_a_valid_change_while_the_older_generations_anomaly_and_events_go_on_is_never_rolled_back(
        memcached, resolver, cluster, monkeypatch) -> None:
    """Generation 2 (a broken image) raised `backoff`, corroborated. The user fixes it: generation 3, the good
    template. Generation 2's Pod keeps failing and its Events keep arriving inside the window while generation 3
    rolls out: the anomaly is superseded, on record, the old Events are nobody's evidence, nothing is rolled back."""
    monkeypatch.setattr(rules, "pod_reader", lambda api: cluster.pod)
    writes: list[Any] = []
    monkeypatch.setattr(rollback.kube, "request_json", lambda *a, **k: writes.append(a) or {})
    Transition.objects.create(resource_id=memcached.pk, resource_uid="mc-1", kind="Memcached", namespace=NS,
                              name="web", seq=1, from_phase="Pending", to_phase="Running", generation=1, hash="h1")
    events_archive([(event(f"old-{i}", POD_NEW), None) for i in range(3)], resolver)
    evaluator = _evaluator(api=object())  # automatic rollback off while generation 2 is on
    assert evaluator.step().detected == 1
    assert Resource.objects.get(pk=memcached.pk).active_anomalies["backoff"]["rollback_ok"] is True
    # the valid change: generation 3, applied; automatic rollback on from now
    Resource.objects.filter(pk=memcached.pk).update(generation=3, observed_generation=3, phase="Pending")
    revision_at("mc-1", 3, timezone.now())
    cluster.objects["dep-1"] = Cluster.deployment(GOOD)
    cluster.objects["rs-old"] = _rs("rs-old", GOOD)  # generation 3's ReplicaSet, just created
    events_archive([(event(f"late-{i}", POD_NEW), None) for i in range(5)], resolver)  # generation 2's Pod
    assert set(KubeEvent.objects.filter(event_uid__startswith="late").values_list("attribution", flat=True)) == {
        "revision-not-current"}
    on = _evaluator(api=object(), annotations={AUTO_ROLLBACK: "true"})
    on.step()
    on.step()
    resource = Resource.objects.get(pk=memcached.pk)
    assert resource.active_anomalies == {} and resource.rollback is None and writes == []
    cleared = HealingRecord.objects.get(action=HealingAction.ANOMALY_CLEARED)
    assert cleared.reason == "superseded by generation 3"
    assert not HealingRecord.objects.filter(action__startswith="rollback").exists()
