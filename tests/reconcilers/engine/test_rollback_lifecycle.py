"""A rollback's lifecycle against kubesim, the engine's recording and the healing step run here (issue 38): on
record (`rollback.started`, state `writing`) before its write, the write carrying the rollback's id, then
`rollback.applied` with the generation the PUT returned; a crash between the two resolved from the object both ways
(the database backend killed after the write: applied; the write never made: failed, escalated); one actor on every
record of a rollback; the anomaly trigger counting only this generation's corroborated anomalies; and no fights
with a re-applier (deferred, then escalated naming who re-applied it)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from reconcilers.core.meta import ROLLBACK_ID
from reconcilers.engine import kube
from reconcilers.engine.audit import chain_verify
from reconcilers.engine.healing import rollback, state
from reconcilers.engine.healing.automatic import automatic
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.engine.healing.report import HealReport
from reconcilers.engine.recording import ObservedObject, PhaseChange, reconcile_record
from reconcilers.models import HealingAction, HealingRecord, Resource, SpecRevision
from tests.reconcilers.audit_support import run_for
from tests.reconcilers.testkinds import GADGET, MACHINE, GadgetReconciler, gadget

pytestmark = pytest.mark.django_db(transaction=True)

REC = GadgetReconciler()


def mirror(live: dict[str, Any], phase: str | None = None, actor: str = "controller") -> Resource:
    """Record a run of the live object as the runner does (its spec revision, the phase, the verification); a run
    that records a phase reconciled this generation (observedGeneration)."""
    if phase is not None:
        live = {**live, "status": {**(live.get("status") or {}), "observedGeneration": live["metadata"]["generation"]}}
    obs = ObservedObject.from_api(GADGET, live)
    change = PhaseChange(phase, "Test", f"now {phase}", actor=actor) if phase else None
    reconcile_record(run_for(obs), obs, change, MACHINE, live=live, reconciler=REC)
    return Resource.objects.get(uid=live["metadata"]["uid"])


def apply(kapi: Any, namespace: str, name: str, spec: dict[str, Any], manager: str = "argocd-controller") -> dict:
    return kube.request_json(kapi, "PATCH", kube.object_path(GADGET, namespace, name), body={"spec": spec},
                             query={"fieldManager": manager}, content_type=kube.MERGE_PATCH)


def live_of(kapi: Any, res: Resource) -> dict[str, Any]:
    return kube.get_object(kapi, GADGET, res.namespace, res.name)


def actions(res: Resource) -> list[str]:
    return list(HealingRecord.objects.filter(resource_uid=res.uid).order_by("seq").values_list("action", flat=True))


def broken(kapi: Any, namespace: str, name: str = "g") -> Resource:
    """Generation 1 Running, generation 2 (re-applied by argocd-controller) Failed."""
    live = kube.create_object(kapi, GADGET, gadget(namespace, name, mode="ok", size=1))
    mirror(live, "Running")
    return mirror(apply(kapi, namespace, name, {"mode": "permanent"}), "Failed")


def step(kapi: Any, now: Any = None) -> Any:
    return Evaluator(kapi, [REC], annotations=lambda _r, _o: {"opsconsole.io/auto-rollback": "true"},
                     enqueue=lambda keys: None).step(now=now)


@pytest.fixture
def ns(kapi) -> str:
    import uuid

    name = f"rb-{uuid.uuid4().hex[:8]}"
    kube.create_object(kapi, kube.ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False),
                       {"metadata": {"name": name}})
    return name


def _committed(sql: str, params: list[Any]) -> Any:
    """One query on a connection of its own: what is committed, not what this connection's transaction sees."""
    s = connection.settings_dict
    with psycopg.connect(dbname=s["NAME"], user=s["USER"], host=s["HOST"] or None, port=s["PORT"] or None,
                         password=s["PASSWORD"] or None, autocommit=True) as other:
        return other.execute(sql, params).fetchall()


# -- the phases ------------------------------------------------------------------------------------------------


def test_a_rollback_is_on_record_before_its_write_which_carries_its_id_and_then_applied(kapi, ns, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("reads what is committed from a second PostgreSQL connection")
    res = broken(kapi, ns)
    seen: dict[str, Any] = {}
    real = kube.request_json

    def spy(api, method, path, **kw):
        if method == "PUT":  # what is committed when the write goes out
            seen["records"] = _committed("SELECT action, actor FROM reconcilers_healingrecord WHERE resource_uid = %s",
                                         [res.uid])
            seen["state"] = _committed("SELECT rollback->>'state' FROM reconcilers_resource WHERE uid = %s",
                                       [res.uid])[0][0]
            seen["annotation"] = kw["body"]["metadata"]["annotations"][ROLLBACK_ID]
        return real(api, method, path, **kw)

    monkeypatch.setattr(kube, "request_json", spy)
    started = rollback.rollback_apply(kapi, REC, res.id, 1, actor="user:alice", reason="bad mode")
    assert seen["records"] == [("rollback.started", "rollback:user:alice")] and seen["state"] == state.WRITING
    assert seen["annotation"] == started.detail["rollback_id"]
    live = live_of(kapi, res)
    assert live["spec"] == {"mode": "ok", "size": 1} and live["metadata"]["annotations"][ROLLBACK_ID] == \
        started.detail["rollback_id"]
    res.refresh_from_db()
    assert (res.rollback["state"], res.rollback["generation"], res.rollback["actor"]) == (
        state.IN_PROGRESS, 3, "rollback:user:alice")
    applied = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_APPLIED)
    assert (applied.actor, applied.detail["generation"], applied.detail["rollback_id"]) == (
        "rollback:user:alice", 3, started.detail["rollback_id"])
    # the restored generation's revision, its runs and its success all name the rollback
    res = mirror(live, "Running", actor="rollback:user:alice")
    assert SpecRevision.objects.get(resource_uid=res.uid, generation=3).actor == "rollback:user:alice"
    assert res.rollback["state"] == state.SUCCEEDED
    assert list(HealingRecord.objects.filter(resource_uid=res.uid).order_by("seq").values_list("action", "actor")) == [
        ("rollback.started", "rollback:user:alice"), ("rollback.applied", "rollback:user:alice"),
        ("rollback.succeeded", "rollback:user:alice")]
    assert chain_verify().ok


def test_a_write_the_api_server_refuses_is_recorded_as_not_written_and_the_state_left_as_it_was(kapi, ns,
                                                                                                 monkeypatch):
    res = broken(kapi, ns)
    real = kube.request_json

    def conflict(api, method, path, **kw):
        if method == "PUT":
            raise kube.ApiException(status=409, reason="Conflict")
        return real(api, method, path, **kw)

    monkeypatch.setattr(kube, "request_json", conflict)
    with pytest.raises(rollback.RollbackRefused) as refused:
        rollback.rollback_apply(kapi, REC, res.id, 1, actor="user:alice", reason="x")
    assert (refused.value.status, refused.value.field) == (409, "resource")
    assert actions(res) == [HealingAction.ROLLBACK_STARTED, HealingAction.ROLLBACK_FAILED]
    failed = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_FAILED)
    assert failed.actor == "rollback:user:alice" and failed.detail["written"] is False
    res.refresh_from_db()
    assert res.rollback is None and live_of(kapi, res)["metadata"]["generation"] == 2


# -- a crash between the record and the write ----------------------------------------------------------------


def test_the_database_killed_after_the_write_is_resolved_from_the_object_as_applied(kapi, ns, monkeypatch):
    """The attack: the database backend killed while the rollback's record waited, after the PUT had landed.
    Before issue 38 the cluster held the rolled-back spec and no `rollback.started` existed."""
    if connection.vendor != "postgresql":
        pytest.skip("kills a PostgreSQL backend")
    res = broken(kapi, ns)
    real = kube.request_json

    def put_then_kill(api, method, path, **kw):
        answer = real(api, method, path, **kw)
        if method == "PUT":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]
            _committed("SELECT pg_terminate_backend(%s)", [pid])
        return answer

    monkeypatch.setattr(kube, "request_json", put_then_kill)
    with pytest.raises(Exception):  # noqa: B017 - whatever the dead connection raises
        rollback.rollback_apply(kapi, REC, res.id, 1, actor="controller", reason="bad", auto=True)
    monkeypatch.setattr(kube, "request_json", real)
    connection.close()
    live = live_of(kapi, res)
    assert live["spec"]["mode"] == "ok" and live["metadata"]["generation"] == 3  # the write landed
    res.refresh_from_db()
    assert res.rollback["state"] == state.WRITING and actions(res) == [HealingAction.ROLLBACK_STARTED]
    # the runner records generation 3 before the rollback is resolved: no proof yet, so the field manager's claim
    res = mirror(live, "Pending")
    assert SpecRevision.objects.get(resource_uid=res.uid, generation=3).actor == "manager:opsconsole-rollback"
    assert step(kapi).rollbacks == 0 and actions(res) == [HealingAction.ROLLBACK_STARTED]  # within the grace
    step(kapi, now=timezone.now() + timedelta(seconds=rollback.WRITING_GRACE_SECONDS + 1))
    res.refresh_from_db()
    assert actions(res) == [HealingAction.ROLLBACK_STARTED, HealingAction.ROLLBACK_APPLIED]
    applied = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_APPLIED)
    started = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_STARTED)
    assert (applied.actor, applied.detail["generation"], applied.detail["recovered"]) == ("rollback:auto", 3, True)
    assert live["metadata"]["annotations"][ROLLBACK_ID] == started.detail["rollback_id"] == applied.detail[
        "rollback_id"]
    assert (res.rollback["state"], res.rollback["generation"]) == (state.IN_PROGRESS, 3)
    res = mirror(live_of(kapi, res), "Running", actor="rollback:auto")
    assert res.rollback["state"] == state.SUCCEEDED  # verification goes on as usual
    assert chain_verify().ok


def test_a_rollback_whose_write_never_happened_is_failed_on_record_and_escalated(kapi, ns, monkeypatch):
    res = broken(kapi, ns)
    real = kube.request_json

    def lost(api, method, path, **kw):
        if method == "PUT":
            raise kube.ApiException(status=0, reason="ConnectionResetError")  # no answer: written or not?
        return real(api, method, path, **kw)

    monkeypatch.setattr(kube, "request_json", lost)
    with pytest.raises(kube.ApiException):
        rollback.rollback_apply(kapi, REC, res.id, 1, actor="controller", reason="bad", auto=True)
    monkeypatch.setattr(kube, "request_json", real)
    res.refresh_from_db()
    assert res.rollback["state"] == state.WRITING
    report = step(kapi, now=timezone.now() + timedelta(seconds=rollback.WRITING_GRACE_SECONDS + 1))
    assert [e.reason for e in report.escalations] == ["RollbackFailed"]
    res.refresh_from_db()
    assert actions(res) == [HealingAction.ROLLBACK_STARTED, HealingAction.ROLLBACK_FAILED,
                            HealingAction.ANOMALY_DETECTED]
    failed = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_FAILED)
    assert failed.actor == "rollback:auto" and "never written" in failed.reason
    assert res.rollback["state"] == state.FAILED and "rollback_failed" in res.active_anomalies
    assert live_of(kapi, res)["metadata"]["generation"] == 2  # and nothing was written since
    assert step(kapi, now=timezone.now() + timedelta(seconds=60)).rollbacks == 0  # never rolled back after that
    assert chain_verify().ok


def test_a_rollback_id_forged_onto_an_object_its_write_never_reached_is_no_proof(kapi, ns, monkeypatch):
    """The rollback's id is in its record, which a viewer may read: someone who may patch the object copies it onto
    the annotation while the write's answer is lost. The object's generation never moved, so no write of the
    rollback made it: the record says never written, never applied."""
    from reconcilers.core.meta import ROLLBACK_ID

    res = broken(kapi, ns, "forged")
    real = kube.request_json

    def lost(api, method, path, **kw):
        if method == "PUT":
            raise kube.ApiException(status=0, reason="ConnectionResetError")
        return real(api, method, path, **kw)

    monkeypatch.setattr(kube, "request_json", lost)
    with pytest.raises(kube.ApiException):
        rollback.rollback_apply(kapi, REC, res.id, 1, actor="controller", reason="bad", auto=True)
    monkeypatch.setattr(kube, "request_json", real)
    res.refresh_from_db()
    kube.request_json(kapi, "PATCH", kube.object_path(GADGET, ns, "forged"), content_type=kube.MERGE_PATCH,
                      body={"metadata": {"annotations": {ROLLBACK_ID: res.rollback["id"]}}},
                      query={"fieldManager": "opsconsole-rollback"})
    report = step(kapi, now=timezone.now() + timedelta(seconds=rollback.WRITING_GRACE_SECONDS + 1))
    assert [e.reason for e in report.escalations] == ["RollbackFailed"]
    assert HealingAction.ROLLBACK_APPLIED not in actions(res)
    failed = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_FAILED)
    assert "never written" in failed.reason and "no write of this rollback made" in failed.reason
    assert chain_verify().ok


# -- no fights ---------------------------------------------------------------------------------------------------


def test_a_re_applied_bad_spec_is_deferred_then_escalated_naming_the_re_applier(kapi, ns):
    res = broken(kapi, ns, "fight")
    now = timezone.now()
    assert step(kapi, now).rollbacks == 1
    mirror(live_of(kapi, res), "Running", actor="rollback:auto")
    res = mirror(apply(kapi, ns, "fight", {"mode": "permanent"}), "Failed")  # repeat 1: generation 4
    assert step(kapi, now).rollbacks == 0
    deferred = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_DEFERRED)
    assert deferred.detail["repeat"] == 1 and deferred.detail["reapplier"] == "manager:argocd-controller"
    until = deferred.detail["until"]
    assert until in deferred.message and datetime.fromisoformat(until) == now + timedelta(seconds=300)
    assert step(kapi, now + timedelta(seconds=299)).rollbacks == 0  # within the back-off: still deferred
    assert not HealingRecord.objects.filter(resource_uid=res.uid, action=HealingAction.ROLLBACK_REFUSED).exists()
    later = now + timedelta(seconds=301)
    report = step(kapi, later)  # the back-off passed and it is still bad: a person, not a second rollback
    assert report.rollbacks == 0 and [e.reason for e in report.escalations] == ["RollbackRefused"]
    refused = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_REFUSED)
    assert "repeat 1" in refused.reason and "manager:argocd-controller" in refused.reason
    assert "back-off ended" in refused.reason and refused.actor == "controller"
    assert step(kapi, later + timedelta(seconds=3600)).rollbacks == 0
    assert live_of(kapi, res)["metadata"]["generation"] == 4
    assert actions(res).count(HealingAction.ROLLBACK_APPLIED) == 1 and actions(res).count(
        HealingAction.ROLLBACK_DEFERRED) == 1
    assert chain_verify().ok


def test_a_fix_applied_during_the_deferral_supersedes_it(kapi, ns):
    res = broken(kapi, ns, "fixed")
    now = timezone.now()
    assert step(kapi, now).rollbacks == 1
    mirror(live_of(kapi, res), "Running", actor="rollback:auto")
    mirror(apply(kapi, ns, "fixed", {"mode": "permanent"}), "Failed")  # repeat 1: deferred
    assert step(kapi, now).rollbacks == 0
    res = mirror(apply(kapi, ns, "fixed", {"mode": "ok", "size": 2}), "Running")  # the source fixed: generation 5
    report = step(kapi, now + timedelta(seconds=301))
    assert report.rollbacks == 0 and report.escalations == []
    assert not HealingRecord.objects.filter(resource_uid=res.uid, action=HealingAction.ROLLBACK_REFUSED).exists()


def test_a_second_repeat_is_escalated_at_once(kapi, ns):
    """The spec rolled back twice (automatically, then by a person) and re-applied again: no deferral."""
    res = broken(kapi, ns, "twice")
    now = timezone.now()
    assert step(kapi, now).rollbacks == 1
    mirror(live_of(kapi, res), "Running", actor="rollback:auto")
    res = mirror(apply(kapi, ns, "twice", {"mode": "permanent"}), "Failed")  # generation 4, deferred
    assert step(kapi, now).rollbacks == 0
    rollback.rollback_apply(kapi, REC, res.id, 3, actor="user:alice", reason="not waiting")  # generation 5
    mirror(live_of(kapi, res), "Running", actor="rollback:user:alice")
    res = mirror(apply(kapi, ns, "twice", {"mode": "permanent"}), "Failed")  # generation 6: repeat 2
    report = step(kapi, now + timedelta(seconds=1))
    assert report.rollbacks == 0 and [e.reason for e in report.escalations] == ["RollbackRefused"]
    refused = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_REFUSED)
    assert "repeat 2" in refused.reason and refused.generation == 6
    assert actions(res).count(HealingAction.ROLLBACK_DEFERRED) == 1


def test_a_newer_generation_than_the_one_the_rollback_was_decided_about_is_never_rolled_back(kapi, ns):
    """The record still says generation 2 (Failed) when the step decides, but a person's valid change (generation
    3) has reached the cluster: that change was never judged, so nothing is written or recorded."""
    res = broken(kapi, ns, "raced")
    apply(kapi, ns, "raced", {"mode": "ok", "size": 2}, manager="kubectl-edit")  # generation 3, not mirrored yet
    report = step(kapi)
    assert report.rollbacks == 0 and report.escalations == []
    live = live_of(kapi, res)
    assert (live["metadata"]["generation"], live["spec"]) == (3, {"mode": "ok", "size": 2})
    assert not HealingRecord.objects.filter(resource_uid=res.uid, action=HealingAction.ROLLBACK_STARTED).exists()


def test_a_later_change_during_the_verification_ends_the_rollback_on_record(kapi, ns):
    res = broken(kapi, ns, "replaced")
    assert step(kapi).rollbacks == 1  # generation 3 restored, being verified
    res = mirror(apply(kapi, ns, "replaced", {"mode": "ok", "size": 3}, manager="kubectl-edit"))  # generation 4
    step(kapi)
    superseded = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_SUPERSEDED)
    assert superseded.reason == "generation 4 (by manager:kubectl-edit) superseded generation 3"
    assert superseded.detail["state"] == state.IN_PROGRESS and superseded.actor == "controller"
    assert Resource.objects.get(uid=res.uid).rollback is None
    assert chain_verify().ok


# -- the anomaly trigger -----------------------------------------------------------------------------------------


def test_only_this_generations_anomalies_that_may_roll_back_trigger_a_rollback(kapi, ns):
    live = kube.create_object(kapi, GADGET, gadget(ns, "anom", mode="ok"))
    mirror(live, "Running")
    res = mirror(apply(kapi, ns, "anom", {"mode": "pending"}), "Pending")
    now = timezone.now()
    for entry in ({"record": 7}, {"record": 7, "generation": 2}, {"record": 7, "generation": 1, "rollback_ok": True},
                  {"record": 7, "generation": "2", "rollback_ok": True}, {"record": 7, "generation": 2,
                                                                          "rollback_ok": "yes"}):
        res.active_anomalies = {"backoff": entry}
        assert rollback.rollback_due(res, REC, now) is None, entry
    res.active_anomalies = {"backoff": {"record": 7, "generation": 2, "rollback_ok": True},
                            "stuck": {"record": 8, "generation": 2, "rollback_ok": False}}
    due = rollback.rollback_due(res, REC, now)
    assert due is not None and due.what == "rollback"
    assert due.why == "generation 2 led to the anomaly backoff (evidence: healing record #7)"
    assert due.detail == {"cause": "anomaly", "generation": 2, "anomalies": [{"rule": "backoff", "record": 7}],
                          "target": 1}
    Resource.objects.filter(pk=res.pk).update(active_anomalies=res.active_anomalies)
    report = HealReport()
    automatic(kapi, REC, Resource.objects.filter(pk=res.pk), 300, now, report, settled=set(),
              enabled=lambda _rec, _res: True)
    assert report.rollbacks == 1
    started = HealingRecord.objects.get(resource_uid=res.uid, action=HealingAction.ROLLBACK_STARTED)
    assert started.detail["trigger"]["anomalies"] == [{"rule": "backoff", "record": 7}]
    assert "evidence: healing record #7" in started.reason and started.actor == "rollback:auto"


def test_a_rollback_target_whose_spec_the_kind_no_longer_accepts_is_refused_with_the_reason_and_nothing_written():
    """The kind's model changed since generation 1 was recorded (here: a size it now refuses): a rollback to it is
    refused before anything is on record or written, naming the field."""
    from reconcilers.engine.healing.rollback import RollbackRefused, rollback_apply
    from tests.reconcilers.audit_support import observed, record
    from tests.reconcilers.engine.test_healing import REC, _revision

    record(observed("bad-target", generation=1, observed_generation=1), "Running")
    _revision("bad-target", 1, {"size": 1000})  # recorded when the kind allowed it; the model now says <= 100
    record(observed("bad-target", generation=2, observed_generation=2, spec={"size": 3}), "Failed")
    _revision("bad-target", 2, {"size": 3})
    with pytest.raises(RollbackRefused) as refused:
        rollback_apply(None, REC, Resource.objects.get(uid="bad-target").id, 1, actor="user:alice", reason="try")
    assert refused.value.status == 422
    assert "no longer validates" in refused.value.message and "size" in refused.value.message
    assert not HealingRecord.objects.filter(resource_uid="bad-target").exists()
