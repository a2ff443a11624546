"""Self-healing's rules over the record (no cluster): healing records as links of the chain, the evaluator's
anomaly rules (events, flapping, stuck) detected and cleared, when the automatic path rolls back or escalates,
a rollback's verification, and the conditions healing puts on the object."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from reconcilers.core.meta import AUTO_ROLLBACK
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import metrics, step
from reconcilers.engine.audit import EDITED, HEALING, REMOVED, chain_verify
from reconcilers.engine.healing import records, rollback, state
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.models import HealingAction, HealingRecord, KubeEvent, Resource, SpecRevision
from tests.reconcilers.audit_support import observed, record, tamper

pytestmark = pytest.mark.django_db

REC = MemcachedReconciler()
ON = {AUTO_ROLLBACK: "true"}


def _resource(uid: str) -> Resource:
    return Resource.objects.get(uid=uid)


def _append(uid: str, action: str = HealingAction.ANOMALY_DETECTED, **fields: Any) -> HealingRecord:
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=uid)
        made = records.healing_append(row, action, actor="controller", **fields)
        row.save()
    return made


def _revision(uid: str, generation: int, spec: dict[str, Any], at: Any = None) -> None:
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=uid)
        rev = SpecRevision(resource=row, resource_uid=uid, kind=row.kind, namespace=row.namespace, name=row.name,
                           seq=row.last_revision_seq + 1, chain_after=row.last_transition_seq, generation=generation,
                           spec=spec, created_at=at or timezone.now(), prev_hash=row.last_transition_hash)
        from reconcilers.engine.audit import revision_fields, revision_hash

        rev.hash = revision_hash(revision_fields(rev), rev.prev_hash)
        rev.save(force_insert=True)
        row.last_revision_seq, row.last_transition_hash = rev.seq, rev.hash
        row.save()


def _event(uid: str, *, child: bool = True, n: int = 1, reason: str = "Failed", type_: str = "Warning",
           at: Any = None, event_uid: str = "ev-1", count: int = 1) -> KubeEvent:
    """An archived Event attributed to the resource's current generation, observed (at `at`) after that generation
    was applied (its revision is recorded first when there is none)."""
    resource = _resource(uid)
    when = at or timezone.now()
    if not SpecRevision.objects.filter(resource_uid=uid, generation=resource.generation).exists():
        _revision(uid, resource.generation, dict(resource.spec or {}), at=when - timedelta(seconds=1))
    return KubeEvent.objects.create(
        resource=resource, event_uid=event_uid, count=count, occurrences=n, namespace=resource.namespace,
        name=f"{event_uid}.x", type=type_, reason=reason, message="Error: ImagePullBackOff",
        involved_kind="Pod" if child else "Memcached", involved_name="m-pod" if child else resource.name,
        involved_uid="pod-uid" if child else uid, last_timestamp=when, observed_at=when,
        generation=resource.generation, attribution="replicaset" if child else "self")


# -- the chain -------------------------------------------------------------------------------------------------


def test_healing_records_are_links_of_the_resource_chain():
    record(observed("h1"), "Pending")
    made = _append("h1", rule="backoff", message="3 events", detail={"n": 3})
    record(observed("h1"), "Running")
    report = chain_verify()
    assert report.ok, [b.describe() for b in report.breaks]
    assert report.healing == 1
    resource = _resource("h1")
    assert (resource.last_healing_seq, made.seq, made.chain_after, made.revision_after) == (1, 1, 1, 0)
    from reconcilers.models import Transition

    after = Transition.objects.get(resource_uid="h1", seq=2)
    assert after.prev_hash == made.hash  # the next transition chains onto the healing link


def test_an_edited_healing_record_is_reported_edited():
    record(observed("h2"), "Pending")
    made = _append("h2", reason="rule matched")
    tamper([("UPDATE reconcilers_healingrecord SET reason = %s WHERE id = %s", ("nothing to see", made.id))])
    report = chain_verify()
    assert [(b.item, b.problem, b.seq) for b in report.breaks] == [(HEALING, EDITED, 1)]


def test_a_deleted_healing_record_is_reported_removed():
    record(observed("h3"), "Pending")
    made = _append("h3")
    _append("h3", HealingAction.ANOMALY_CLEARED)
    tamper([("DELETE FROM reconcilers_healingrecord WHERE id = %s", (made.id,))])
    report = chain_verify()
    assert [(b.item, b.problem) for b in report.breaks] == [(HEALING, REMOVED)]
    assert "healing 1 missing" in report.breaks[0].detail


# -- anomaly rules ---------------------------------------------------------------------------------------------


def _evaluator(annotations: dict[str, Any] | None = None) -> Evaluator:
    return Evaluator(None, [REC], annotations=lambda _rec, _res: dict(annotations or {}), enqueue=lambda keys: None)


def test_three_warning_events_about_a_child_raise_the_backoff_anomaly_and_it_clears_after_the_window(
        django_capture_on_commit_callbacks):
    record(observed("e1"), "Running")
    _event("e1", n=1, count=1)
    _event("e1", n=2, count=3)  # the same Event seen again at count 3: two more occurrences
    before = metrics.ANOMALIES.labels("Memcached", "backoff")._value.get()
    with django_capture_on_commit_callbacks(execute=True):
        report = _evaluator().step()
    resource = _resource("e1")
    assert report.detected == 1 and set(resource.active_anomalies) == {"backoff"}
    assert metrics.ANOMALIES.labels("Memcached", "backoff")._value.get() == before + 1
    detected = HealingRecord.objects.get(resource=resource, action=HealingAction.ANOMALY_DETECTED)
    assert detected.rule == "backoff" and detected.detail["occurrences"] == 3
    assert detected.detail["events"][0]["involved_kind"] == "Pod"
    assert _evaluator().step().detected == 0  # still matching: recorded once
    later = timezone.now() + timedelta(seconds=301)
    assert _evaluator().step(now=later).cleared == 1
    assert _resource("e1").active_anomalies == {}
    assert chain_verify().ok


def test_events_about_the_object_itself_or_normal_ones_do_not_match_the_children_rule():
    record(observed("e2"), "Running")
    _event("e2", child=False, n=5, event_uid="self")
    _event("e2", n=5, type_="Normal", reason="BackOff", event_uid="normal")
    assert _evaluator().step().detected == 0


def test_flapping_running_degraded_four_times_is_an_anomaly():
    for phase in ("Running", "Degraded", "Running", "Degraded", "Running", "Degraded", "Running", "Degraded"):
        record(observed("f1"), phase)
    _evaluator().step()
    assert set(_resource("f1").active_anomalies) == {"flapping"}


def test_a_kind_of_the_same_name_in_another_group_does_not_add_up_to_flapping():
    """Issue 38: `flapping` counted transitions by Kind name only. A Memcached of another group flapping is no
    anomaly of cache.example.com's Memcached (its rules are not the other kind's), and the two do not add up."""
    other = ResourceKind("cache.other.io", "v1", "memcacheds", "Memcached")
    for phase in ("Running", "Degraded", "Running", "Degraded", "Running", "Degraded", "Running", "Degraded"):
        record(observed("g-other", kind=other), phase)
    for phase in ("Running", "Degraded", "Running", "Degraded"):
        record(observed("g-ours"), phase)
    assert _resource("g-other").group == "cache.other.io" and _resource("g-ours").group == "cache.example.com"
    assert _evaluator().step().detected == 0
    assert _resource("g-other").active_anomalies == {} and _resource("g-ours").active_anomalies == {}
    assert not HealingRecord.objects.filter(action=HealingAction.ANOMALY_DETECTED).exists()


def test_pending_longer_than_the_stuck_rule_is_an_anomaly():
    record(observed("s1"), "Pending")
    assert _evaluator().step().detected == 0
    _evaluator().step(now=timezone.now() + timedelta(seconds=901))
    assert set(_resource("s1").active_anomalies) == {"stuck"}


# -- the automatic path ----------------------------------------------------------------------------------------


def _broken_change(uid: str, *, good: bool = True) -> Resource:
    """Generation 1 (Running when `good`), then generation 2 Failed."""
    record(observed(uid), "Running" if good else "Pending")
    _revision(uid, 1, {"size": 1})
    record(observed(uid, generation=2, observed_generation=2), "Failed", reason="ProgressDeadlineExceeded")
    _revision(uid, 2, {"size": 1, "image": "memcached:broken"})
    return _resource(uid)


def test_a_spec_change_that_led_to_failed_is_due_for_rollback_to_the_last_good_generation():
    resource = _broken_change("r1")
    due = rollback.rollback_due(resource, REC, timezone.now())
    assert due is not None and due[0] == "rollback" and "generation 2 led to Failed" in due[1]
    assert rollback.last_good_generation(resource.id, REC, below=2) == 1


def test_a_failed_phase_an_older_generation_reached_is_no_reason_to_roll_back_a_newer_one():
    """Generation 3 is on record (the watch saw it) while the phase is still generation 2's Failed: generation 3's
    first run has not said anything yet."""
    _broken_change("r1b")
    record(observed("r1b", generation=3, observed_generation=2), None)
    _revision("r1b", 3, {"size": 2})
    resource = _resource("r1b")
    assert (resource.generation, resource.phase, resource.observed_generation) == (3, "Failed", 2)
    assert rollback.rollback_due(resource, REC, timezone.now()) is None


def test_never_past_a_pinned_generation_and_never_without_a_good_one():
    resource = _broken_change("r2")
    resource.pinned_generation = 2
    due = rollback.rollback_due(resource, REC, timezone.now())
    assert due is not None and due[0] == "refuse" and "pinned" in due[1]
    none_good = _broken_change("r3", good=False)
    due = rollback.rollback_due(none_good, REC, timezone.now())
    assert due is not None and due[0] == "refuse" and "no earlier generation" in due[1]


def test_a_generation_a_rollback_made_is_never_rolled_back_again():
    resource = _broken_change("r4")
    resource.rollback = {"state": state.FAILED, "generation": 2}
    assert rollback.rollback_due(resource, REC, timezone.now()) is None


def test_when_no_rollback_can_be_done_the_evaluator_escalates_once():
    _broken_change("r5", good=False)
    report = _evaluator(ON).step()
    assert len(report.escalations) == 1 and report.escalations[0].reason == "RollbackRefused"
    resource = _resource("r5")
    assert resource.rollback["state"] == state.REFUSED
    assert set(resource.active_anomalies) == {metrics.ROLLBACK_FAILED_RULE}
    assert list(HealingRecord.objects.filter(resource=resource).values_list("action", flat=True).order_by("seq")) == [
        HealingAction.ROLLBACK_REFUSED, HealingAction.ANOMALY_DETECTED]
    assert _evaluator(ON).step().escalations == []  # no loop
    assert chain_verify().ok


def test_automatic_rollback_is_off_unless_the_kind_or_the_object_turns_it_on():
    _broken_change("r6", good=False)
    assert _evaluator().step().escalations == []
    assert _evaluator({AUTO_ROLLBACK: "false"}).step().escalations == []


def test_a_suspended_resource_is_never_rolled_back():
    resource = _broken_change("r7", good=False)
    Resource.objects.filter(pk=resource.pk).update(suspended=True)
    assert _evaluator(ON).step().escalations == []


# -- verification and escalation ------------------------------------------------------------------------------


def _in_progress(uid: str, phase: str) -> Resource:
    record(observed(uid), "Running")
    record(observed(uid, generation=3), phase)
    resource = _resource(uid)
    resource.rollback = {"state": state.IN_PROGRESS, "actor": "rollback:auto", "generation": 3, "to_generation": 1,
                         "from_generation": 2, "started_at": timezone.now().isoformat(),
                         "deadline": (timezone.now() + timedelta(seconds=60)).isoformat()}
    resource.save()
    return resource


def test_the_restored_generation_reaching_ready_concludes_the_rollback():
    resource = _in_progress("v1", "Running")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=resource.pk)
        assert rollback.rollback_verify_locked(row, REC, timezone.now()) is None
        row.save()
    resource = _resource("v1")
    assert resource.rollback["state"] == state.SUCCEEDED
    assert HealingRecord.objects.get(resource=resource).action == HealingAction.ROLLBACK_SUCCEEDED


def test_the_restored_generation_failing_escalates():
    resource = _in_progress("v2", "Failed")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=resource.pk)
        escalation = rollback.rollback_verify_locked(row, REC, timezone.now())
        row.save()
    assert escalation is not None and escalation.reason == "RollbackFailed"
    resource = _resource("v2")
    assert resource.rollback["state"] == state.FAILED and metrics.ROLLBACK_FAILED_RULE in resource.active_anomalies


def test_a_rollback_not_ready_by_its_deadline_is_escalated_by_the_evaluator():
    _in_progress("v3", "Pending")
    report = _evaluator().step(now=timezone.now() + timedelta(seconds=61))
    assert [e.reason for e in report.escalations] == ["RollbackFailed"]
    assert _resource("v3").rollback["state"] == state.FAILED


# -- conditions ------------------------------------------------------------------------------------------------


def test_healing_conditions_say_what_is_going_on_and_turn_false_only_when_carried():
    now = state.RecordedState(1, "Running", 2, active_anomalies={"backoff": {"message": "3 events"}},
                              rollback={"state": state.IN_PROGRESS, "to_generation": 1, "generation": 3})
    conditions = {c.type: c for c in state.healing_conditions(now, [])}
    assert conditions["AnomalyDetected"].status == "True" and conditions["AnomalyDetected"].reason == "Backoff"
    assert conditions["RollingBack"].status == "True"
    quiet = state.RecordedState(1, "Running", 2)
    assert state.healing_conditions(quiet, []) == ()
    carried = [{"type": "AnomalyDetected", "status": "True"}]
    assert [(c.type, c.status) for c in state.healing_conditions(quiet, carried)] == [("AnomalyDetected", "False")]


def test_engine_conditions_are_merged_and_an_unchanged_one_is_not_rewritten():
    from reconcilers.core.types import Condition

    old = [{"type": "Ready", "status": "True", "reason": "Running", "message": "", "observedGeneration": 1,
            "lastTransitionTime": "t0"}]
    merged = step.merge_conditions(old, [Condition("AnomalyDetected", "True", "Backoff", "3 events")], 1, "t1")
    assert [c["type"] for c in merged] == ["Ready", "AnomalyDetected"] and merged[1]["lastTransitionTime"] == "t1"
    again = step.merge_conditions(merged, [Condition("AnomalyDetected", "True", "Backoff", "3 events")], 2, "t2")
    assert again == merged


def test_the_mirror_keeps_the_objects_auto_rollback_annotation_and_the_summary_says_where_it_comes_from(
        builtin_kinds_only):
    from reconcilers.engine.recording import ObservedObject
    from reconcilers.services.healing import resource_healing

    live = {"metadata": {"uid": "a1", "name": "m", "namespace": "default", "generation": 1, "resourceVersion": "5",
                         "annotations": {AUTO_ROLLBACK: "true"}}, "spec": {"size": 1}}
    assert ObservedObject.from_api(REC.resource, live).auto_rollback is True
    live["metadata"]["annotations"] = {AUTO_ROLLBACK: "maybe"}
    assert ObservedObject.from_api(REC.resource, live).auto_rollback is None
    record(observed("a1", auto_rollback=True), "Running")
    summary = resource_healing(_resource("a1"))
    assert (summary.auto_rollback, summary.auto_rollback_source) == (True, "annotation")
    record(observed("a1", auto_rollback=None), "Running")
    summary = resource_healing(_resource("a1"))
    assert (summary.auto_rollback, summary.auto_rollback_source) == (False, "kind")
