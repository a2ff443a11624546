"""Issue 14, unit level: managedFields readers, out-of-band status phases in the step, spec revisions in the
chain (recorded once per generation, verified, tampering caught), annotation requests with their manager.
managedFields are made by hand here, in the real Kubernetes format."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection

from reconcilers.core import meta
from reconcilers.core.meta import FIELD_MANAGER, FLUX_REQUESTED_AT, RECONCILE_REQUESTED_AT
from reconcilers.engine import recording, step
from reconcilers.engine.audit import REVISION, chain_verify
from reconcilers.engine.step import OutOfBand, PhaseChange
from reconcilers.models import (
    Anomaly,
    AnomalyCategory,
    AppendOnlyError,
    ReconcileRequest,
    Resource,
    SpecRevision,
    Transition,
)
from tests.reconcilers.audit_support import KIND, MACHINE, observed, run_for

T0 = "2030-01-01T00:00:00Z"
T1 = "2030-01-01T00:00:05Z"
T2 = "2030-01-01T00:00:09Z"


def entry(manager: str, fields: dict, time: str = T0, operation: str = "Update", subresource: str = "") -> dict:
    out = {"manager": manager, "operation": operation, "apiVersion": "cache.example.com/v1alpha1", "time": time,
           "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


def live_obj(uid: str = "uid-1", *, generation: int = 1, spec: dict | None = None, status: dict | None = None,
             managed: list | None = None, annotations: dict | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": f"m-{uid}", "namespace": "default", "uid": uid, "generation": generation,
                          "resourceVersion": str(100 + generation)}
    if managed is not None:
        md["managedFields"] = managed
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "metadata": md,
            "spec": spec if spec is not None else {"size": 3}, "status": status or {}}


PHASE = {"f:status": {"f:phase": {}, "f:reason": {}}}


# -- managedFields readers -------------------------------------------------------------------------------------


def test_last_writer_of_a_field_is_its_newest_owner_and_a_tie_prefers_no_name():
    obj = live_obj(managed=[entry(FIELD_MANAGER, PHASE, T0, subresource="status"),
                            entry("kubectl-patch", PHASE, T1, subresource="status")])
    assert meta.last_writer(obj, ("status", "phase"))["manager"] == "kubectl-patch"
    # a tie: the first in managedFields' order, whichever name it has (a claim either way)
    tie = live_obj(managed=[entry("kubectl-patch", PHASE, T0), entry(FIELD_MANAGER, PHASE, T0)])
    assert meta.last_writer(tie, ("status", "phase"))["manager"] == "kubectl-patch"
    tie = live_obj(managed=[entry(FIELD_MANAGER, PHASE, T0), entry("kubectl-patch", PHASE, T0)])
    assert meta.last_writer(tie, ("status", "phase"))["manager"] == FIELD_MANAGER
    assert meta.last_writer(live_obj(), ("status", "phase")) is None  # no managedFields: an old server
    assert meta.last_writer(live_obj(managed=[entry("x", {"f:spec": {}})]), ("status", "phase")) == {}


def test_spec_diff_and_its_writers():
    old = {"size": 3, "image": "memcached:1.6", "resources": {"limits": {"cpu": "1"}}, "gone": True}
    new = {"size": 5, "image": "memcached:1.6", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}
    diff = meta.spec_diff(old, new)
    assert [(c["path"], c["op"], c["old"], c["new"]) for c in diff] == [
        ("/gone", "remove", True, None), ("/resources/limits/cpu", "replace", "1", "2"),
        ("/resources/limits/memory", "add", None, "1Gi"), ("/size", "replace", 3, 5)]
    obj = live_obj(spec=new, managed=[
        entry("kubectl-client-side-apply", {"f:spec": {".": {}, "f:image": {}}}, T0),
        entry("kubectl-edit", {"f:spec": {"f:size": {}}}, T2),
        entry("argocd-controller", {"f:spec": {"f:resources": {"f:limits": {"f:cpu": {}, "f:memory": {}}}}}, T1)])
    writers = meta.spec_writers(obj, [c for c in diff if c["path"] != "/gone"])
    assert [w["manager"] for w in writers] == ["kubectl-edit", "argocd-controller"]
    assert meta.spec_writers(live_obj(), diff) is None


def test_the_newest_request_annotation_wins_and_a_handled_one_stays_handled():
    obj = live_obj(annotations={RECONCILE_REQUESTED_AT: "2030-01-01T00:00:01.000000Z",
                                FLUX_REQUESTED_AT: "2030-01-01T00:00:02Z"})
    both = (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT)
    assert step.unhandled_request(obj, both) == (FLUX_REQUESTED_AT, "2030-01-01T00:00:02Z")
    assert step.unhandled_request(obj, (RECONCILE_REQUESTED_AT,))[0] == RECONCILE_REQUESTED_AT
    obj["status"]["lastHandledReconcileAt"] = "2030-01-01T00:00:02Z"
    assert step.unhandled_request(obj, both) is None
    # written later according to managedFields: that one, whatever its value says
    obj["metadata"]["managedFields"] = [
        entry("kubectl-annotate", {"f:metadata": {"f:annotations": {f"f:{RECONCILE_REQUESTED_AT}": {}}}}, T2),
        entry("flux", {"f:metadata": {"f:annotations": {f"f:{FLUX_REQUESTED_AT}": {}}}}, T0)]
    assert step.unhandled_request(obj, both)[0] == RECONCILE_REQUESTED_AT


# -- the step: only the engine's own phases are caught up ---------------------------------------------------


def test_a_phase_written_by_another_field_manager_is_out_of_band():
    forged = {"phase": "Degraded", "reason": "Forged", "message": "by hand"}
    obj = live_obj(status=forged, managed=[entry(FIELD_MANAGER, PHASE, T0, subresource="status"),
                                           entry("kubectl-patch", PHASE, T1, subresource="status")])
    found = step.out_of_band(obj, "Running")
    assert found == OutOfBand("Degraded", "Forged", "by hand", "kubectl-patch", "Update", T1, "status")
    assert found.actor == "manager:kubectl-patch"
    assert step.out_of_band(obj, "Degraded") is None  # the phase on record: nothing to say
    named_like_us = live_obj(status=forged, managed=[entry(FIELD_MANAGER, PHASE, T1, subresource="status")])
    assert step.out_of_band(named_like_us, "Running").actor == f"manager:{FIELD_MANAGER}"  # a name proves nothing
    assert step.out_of_band(named_like_us, "Running", ours=True) is None  # proven ours: the genuine catch-up
    assert step.out_of_band(live_obj(status=forged), "Running").manager == ""  # no managedFields: not proven


class _Ctx:
    """Just enough of EngineContext for _decide: a reconciler that concludes Running (or keeps the phase)."""

    def __init__(self, obj: dict, phase: str | None) -> None:
        from reconcilers.core.reconciler import Reconciler
        from reconcilers.core.types import Result

        class Rec(Reconciler):
            resource = KIND
            state_machine = MACHINE

            def reconcile(self, ctx, o):
                return Result(phase=phase, reason="Ok")

        self.reconciler, self.obj, self.spec_changed = Rec(), obj, False
        import logging

        self.log, self.request = logging.getLogger("t"), "k"


def test_the_decision_goes_on_from_the_phase_on_record_not_from_a_forged_one():
    forged = live_obj(status={"phase": "Degraded", "reason": "Forged"},
                      managed=[entry("kubectl-patch", PHASE, T1, subresource="status")])
    # the reconciler concludes Running: no catch-up of Degraded, Running → Running is the change (corrects it)
    decision = step._decide(_Ctx(forged, "Running"), "Running", foreign=True)
    assert (decision.queue, decision.change.to_phase) == (step.QueueAction.FORGET, "Running")
    # a reconciler that keeps the phase (Result.phase None) keeps the one on record, not the forged one
    decision = step._decide(_Ctx(forged, None), "Running", foreign=True)
    assert decision.change.to_phase == "Running"
    # the same live status written by a run of ours is caught up first, as before
    decision = step._decide(_Ctx(forged, "Running"), "Running", foreign=False)
    assert (decision.queue, decision.change.to_phase) == (step.QueueAction.REQUEUE_NOW, "Degraded")


# -- recording: revisions, out-of-band anomalies, annotation requests ------------------------------------------



def _record(uid: str, live: dict, phase: str | None = None, foreign: OutOfBand | None = None, **run):
    obj = observed(uid, generation=live["metadata"]["generation"], spec=live["spec"])
    change = PhaseChange(phase, "Reconciled", f"now {phase}") if phase else None
    return recording.reconcile_record(run_for(obj, **run), obj, change, MACHINE, live=live, out_of_band=foreign)


def _two_revisions(uid: str = "uid-r") -> list[SpecRevision]:
    _record(uid, live_obj(uid, spec={"size": 3}, managed=[
        entry("kubectl-client-side-apply", {"f:spec": {".": {}, "f:size": {}}}, T0)]), "Pending")
    _record(uid, live_obj(uid, spec={"size": 3}), "Running")  # same generation: no second revision
    _record(uid, live_obj(uid, generation=2, spec={"size": 5}, managed=[
        entry("kubectl-client-side-apply", {"f:spec": {".": {}}}, T0),
        entry("kubectl-edit", {"f:spec": {"f:size": {}}}, T1)]), "Running")
    _record(uid, live_obj(uid, generation=3, spec={"size": 5, "image": "x"}, managed=[
        entry("kubectl-edit", {"f:spec": {"f:size": {}}}, T1),
        entry("kubectl-patch", {"f:spec": {"f:image": {}}}, T2)]), "Degraded")
    return list(SpecRevision.objects.filter(resource_uid=uid).order_by("seq"))


@pytest.mark.django_db
def test_each_generation_is_one_revision_naming_who_changed_it_in_the_resources_chain():
    revs = _two_revisions()
    assert [(r.seq, r.generation, r.actor, r.operation) for r in revs] == [
        (1, 1, "manager:kubectl-client-side-apply", "Update"), (2, 2, "manager:kubectl-edit", "Update"),
        (3, 3, "manager:kubectl-patch", "Update")]
    assert revs[1].diff == [{"path": "/size", "op": "replace", "old": 3, "new": 5}]
    assert revs[2].changed_at == datetime(2030, 1, 1, 0, 0, 9, tzinfo=UTC)
    assert revs[0].spec == {"size": 3} and revs[0].diff == [{"path": "/size", "op": "add", "old": None, "new": 3}]
    transitions = list(Transition.objects.filter(resource_uid="uid-r").order_by("seq"))
    assert [t.seq for t in transitions] == [1, 2, 3]  # transitions keep their own seqs
    # the chain: rev1, Pending, Running, rev2, rev3, Degraded
    assert revs[0].prev_hash == "" and transitions[0].prev_hash == revs[0].hash
    assert revs[1].chain_after == 2 and revs[1].prev_hash == transitions[1].hash
    assert revs[2].prev_hash == revs[1].hash and transitions[2].prev_hash == revs[2].hash
    resource = Resource.objects.get(uid="uid-r")
    assert (resource.last_transition_seq, resource.last_revision_seq, resource.last_transition_hash) == (
        3, 3, transitions[2].hash)
    report = chain_verify()
    assert report.ok and (report.transitions, report.revisions, report.chains) == (3, 3, 1)
    with pytest.raises(AppendOnlyError):
        SpecRevision.objects.filter(pk=revs[0].pk).update(actor="manager:someone-else")


@pytest.mark.django_db
def test_an_older_generation_seen_late_adds_no_revision():
    _record("uid-o", live_obj("uid-o", generation=2, spec={"size": 2}), "Pending")
    _record("uid-o", live_obj("uid-o", generation=1, spec={"size": 1}), None)
    assert list(SpecRevision.objects.filter(resource_uid="uid-o").values_list("generation", flat=True)) == [2]


def _tamper(statements: list[tuple[str, tuple]]) -> None:
    """SQL behind the ORM, as a DBA could: on PostgreSQL with the append-only triggers disabled meanwhile."""
    tables = ("reconcilers_transition", "reconcilers_specrevision")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in tables:
                cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        try:
            for sql, params in statements:
                cursor.execute(sql, params)
        finally:
            if connection.vendor == "postgresql":
                for table in tables:
                    cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _break() -> Any:
    report = chain_verify()
    assert not report.ok
    return report.breaks[0]


@pytest.mark.django_db
def test_an_edited_revision_is_caught():
    revs = _two_revisions()
    _tamper([("UPDATE reconcilers_specrevision SET actor = %s WHERE id = %s", ("manager:innocent", revs[1].id))])
    found = _break()
    assert (found.item, found.seq, found.transition_id, found.problem) == (REVISION, 2, revs[1].id, "edited")
    assert f"revision=2 id={revs[1].id}: edited" in found.describe()


@pytest.mark.django_db
def test_an_edited_spec_in_a_revision_is_caught():
    revs = _two_revisions()
    _tamper([("UPDATE reconcilers_specrevision SET spec = %s WHERE id = %s", ('{"size": 50}', revs[0].id))])
    assert (_break().seq, _break().problem) == (1, "edited")


@pytest.mark.django_db
@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_deleted_revision_is_caught(which):
    revs = _two_revisions()
    _tamper([("DELETE FROM reconcilers_specrevision WHERE id = %s", (revs[which].id,))])
    found = _break()
    assert (found.item, found.seq, found.problem) == (REVISION, which + 1, "removed")


@pytest.mark.django_db
def test_reordered_revisions_are_caught():
    revs = _two_revisions()
    sql = "UPDATE reconcilers_specrevision SET seq = %s WHERE id = %s"
    _tamper([(sql, (1000, revs[1].id)), (sql, (2, revs[2].id)), (sql, (3, revs[1].id))])
    assert _break().problem in ("reordered", "edited")
    assert chain_verify().breaks[0].item == REVISION


@pytest.mark.django_db
def test_a_transition_after_a_deleted_revision_does_not_verify_either():
    revs = _two_revisions()
    _tamper([("DELETE FROM reconcilers_specrevision WHERE id = %s", (revs[2].id,)),
             ("UPDATE reconcilers_resource SET last_revision_seq = 2 WHERE uid = %s", ("uid-r",))])
    found = _break()  # the head was fixed up too: the next link still names the missing revision's hash
    assert found.problem == "edited" and "another one" in found.detail


@pytest.mark.django_db
def test_a_forged_phase_is_an_out_of_band_anomaly_not_a_transition():
    _record("uid-f", live_obj("uid-f"), "Running")
    forged = OutOfBand("Failed", "Forged", "by hand", "kubectl-patch", "Update", T1, "status")
    first = _record("uid-f", live_obj("uid-f"), "Running", foreign=forged)
    again = _record("uid-f", live_obj("uid-f"), "Running", foreign=forged)  # the same write seen twice
    assert first.out_of_band_id == again.out_of_band_id is not None
    anomaly = Anomaly.objects.get(pk=first.out_of_band_id)
    assert (anomaly.category, anomaly.actor, anomaly.from_phase, anomaly.to_phase, anomaly.run_id) == (
        AnomalyCategory.OUT_OF_BAND, "manager:kubectl-patch", "Running", "Failed", None)
    assert anomaly.observed["manager"] == "kubectl-patch" and "kubectl-patch" in anomaly.detail
    assert list(Transition.objects.filter(resource_uid="uid-f").values_list("to_phase", "actor")) == [
        ("Pending", "controller"), ("Running", "controller")]
    assert Resource.objects.get(uid="uid-f").phase == "Running"
    assert chain_verify().ok


@pytest.mark.django_db
def test_an_annotation_request_gets_a_row_an_action_record_and_is_never_doubled():
    from reconcilers.models import ActionRecord

    token = "2030-01-01T00:00:03Z"
    key = KIND.request("default", "m-uid-a").key()
    annotated = live_obj("uid-a", annotations={FLUX_REQUESTED_AT: token}, managed=[
        entry("kubectl-annotate", {"f:metadata": {"f:annotations": {f"f:{FLUX_REQUESTED_AT}": {}}}}, T1)])
    row = recording.annotation_request_ensure(key, annotated, FLUX_REQUESTED_AT, token)
    assert row is not None and (row.actor, row.state, row.token) == ("manager:kubectl-annotate", "requested", token)
    assert recording.annotation_request_ensure(key, annotated, FLUX_REQUESTED_AT, token) is None
    action = ActionRecord.objects.get()
    assert (action.actor, action.action, action.target, action.outcome) == (
        "manager:kubectl-annotate", "resource.reconcile", key, "allowed")
    assert action.detail["managedFields"]["manager"] == "kubectl-annotate"
    # the console's own request: its row exists (same token): nothing more
    ReconcileRequest.objects.create(key=key, token="t2", actor="user:alice", reason="console")
    ours = live_obj("uid-a", annotations={RECONCILE_REQUESTED_AT: "t2"}, managed=[
        entry(FIELD_MANAGER, {"f:metadata": {"f:annotations": {f"f:{RECONCILE_REQUESTED_AT}": {}}}}, T2)])
    assert recording.annotation_request_ensure(key, ours, RECONCILE_REQUESTED_AT, "t2") is None
    assert ReconcileRequest.objects.count() == 2 and ActionRecord.objects.count() == 1
