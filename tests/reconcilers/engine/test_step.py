"""The reconcile step alone, against a real kubesim and nothing else: no database (these tests have no
django_db mark, so any query would fail them), no Redis, no Celery. What a reconcile decides, writes to the
object's status and hands the queue, as the runner, the kopf benchmark and a kind author's tests see it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from reconcilers.core.meta import FIELD_MANAGER, RECONCILE_REQUESTED_AT
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result, TemporaryError
from reconcilers.engine import kube, provenance, step
from reconcilers.engine.step import PlannedTransition, QueueAction
from tests.reconcilers.testkinds import FINALIZER, GADGET, MACHINE, gadget

pytestmark = pytest.mark.integration


class StepGadget(Reconciler):
    """A Gadget reconciler that needs nothing but the API: `spec.mode` ok / pending / permanent / temporary /
    crash / conflict (changes the object once during the reconcile, so the status write meets a 409)."""

    resource: ClassVar[ResourceKind] = GADGET
    state_machine: ClassVar[StateMachine] = MACHINE
    finalizer: ClassVar[str | None] = FINALIZER
    conflicted: ClassVar[set[str]] = set()

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        spec, meta = obj.get("spec") or {}, obj["metadata"]
        mode = spec.get("mode", "ok")
        if mode == "pending":
            return Result("Pending", "Waiting", "waiting", requeue_after=30.0)
        if mode == "permanent":
            raise PermanentError("the gadget is broken for good", reason="GadgetBroken")
        if mode == "temporary":
            raise TemporaryError("the gadget is busy", delay=7.0, reason="GadgetBusy")
        if mode == "crash":
            raise RuntimeError("the gadget exploded")
        if mode == "conflict" and meta["uid"] not in self.conflicted:
            self.conflicted.add(meta["uid"])
            kube.patch_object(ctx.api_client, GADGET, meta["namespace"], meta["name"],
                              {"metadata": {"annotations": {"test.opsconsole.io/touched": "yes"}}})
        return Result("Running", "Working", f"mode {mode}", status={"mode": mode},
                      conditions=[ctx.condition("Working", "True", "Working")])


REC = StepGadget()


@pytest.fixture
def make(kapi, namespace):
    def create(name: str = "g", **spec: Any) -> dict[str, Any]:
        return kube.create_object(kapi, GADGET, gadget(namespace, name, **spec))

    return create


def live(kapi, obj):
    return kube.get_object(kapi, GADGET, obj["metadata"]["namespace"], obj["metadata"]["name"])


def test_a_first_step_writes_running_plans_pending_then_running_and_forgets_the_key(make, kapi):
    obj = make(mode="ok")
    out = step.reconcile_step(REC, kapi, obj, None)
    assert (out.result, out.queue, out.delay) == ("success", QueueAction.FORGET, None)
    assert out.change is not None and out.change.to_phase == "Running" and not out.refused
    assert out.transitions == [
        PlannedTransition("", "Pending", "Initialized", "first recorded phase, on the way to Running"),
        PlannedTransition("Pending", "Running", "Working", "mode ok")]
    assert [(e.type, e.message) for e in out.events] == [
        ("Normal", "(new) -> Pending: first recorded phase, on the way to Running"),
        ("Normal", "Pending -> Running: mode ok")]
    written = live(kapi, obj)
    assert out.obj["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert written["status"]["phase"] == "Running" and written["status"]["observedGeneration"] == 1
    assert {c["type"]: c["status"] for c in written["status"]["conditions"]} == {
        "Ready": "True", "Reconciling": "False", "Stalled": "False", "Working": "True"}
    assert FINALIZER in written["metadata"]["finalizers"]


def test_an_unchanged_object_is_not_written_again(make, kapi):
    obj = make(mode="ok")
    first = step.reconcile_step(REC, kapi, obj, None)
    again = step.reconcile_step(REC, kapi, first.obj, "Running")
    assert again.obj["metadata"]["resourceVersion"] == first.obj["metadata"]["resourceVersion"]
    assert again.transitions == [] and again.events == [] and again.queue is QueueAction.FORGET


def test_a_permanent_error_writes_failed_with_its_reason_and_is_not_retried(make, kapi):
    obj = make(mode="permanent")
    out = step.reconcile_step(REC, kapi, obj, "Pending")
    assert (out.result, out.queue, out.error_class) == ("error", QueueAction.FORGET, "PermanentError")
    assert "broken for good" in out.error_message
    status = live(kapi, obj)["status"]
    assert status["phase"] == "Failed" and status["reason"] == "GadgetBroken"
    assert out.transitions == [PlannedTransition("Pending", "Failed", "GadgetBroken", "the gadget is broken for good")]
    assert [e.type for e in out.events] == ["Warning"]


def test_a_temporary_error_is_retried_after_its_delay_and_writes_no_phase(make, kapi):
    obj = make(mode="temporary")
    out = step.reconcile_step(REC, kapi, obj, None)
    assert (out.result, out.queue, out.delay) == ("error", QueueAction.RETRY_AFTER, 7.0)
    assert out.error_class == "TemporaryError" and "GadgetBusy" in out.error_message
    assert out.change is None and out.transitions == []
    assert "phase" not in (live(kapi, obj).get("status") or {})


def test_an_unexpected_exception_backs_off(make, kapi):
    obj = make(mode="crash")
    out = step.reconcile_step(REC, kapi, obj, None)
    assert (out.result, out.queue, out.error_class) == ("error", QueueAction.BACKOFF, "RuntimeError")
    assert "exploded" in out.error_message and out.change is None


def test_requeue_after_is_a_queue_action_with_its_seconds(make, kapi):
    out = step.reconcile_step(REC, kapi, make(mode="pending"), None)
    assert (out.result, out.queue, out.delay) == ("requeue_after", QueueAction.REQUEUE_AFTER, 30.0)


def test_a_409_on_the_status_write_is_re_read_and_retried_keeping_the_concurrent_change(make, kapi):
    obj = make(mode="conflict")
    out = step.reconcile_step(REC, kapi, obj, None)
    assert out.status_conflicts == 1 and out.result == "success"
    after = live(kapi, obj)
    assert after["status"]["phase"] == "Running"
    assert after["metadata"]["annotations"]["test.opsconsole.io/touched"] == "yes"


def test_a_spec_change_sets_the_new_observed_generation_without_a_transition(make, kapi):
    obj = make(mode="ok")
    step.reconcile_step(REC, kapi, obj, None)
    changed = kube.patch_object(kapi, GADGET, obj["metadata"]["namespace"], "g", {"spec": {"mode": "ok", "x": 1}})
    out = step.reconcile_step(REC, kapi, changed, "Running")
    assert out.obj["metadata"]["generation"] == 2 and out.obj["status"]["observedGeneration"] == 2
    assert out.transitions == []


def test_a_manual_request_token_is_handled_once(make, kapi):
    obj = make(mode="ok")
    first = step.reconcile_step(REC, kapi, obj, None)
    asked = kube.patch_object(kapi, GADGET, obj["metadata"]["namespace"], "g",
                              {"metadata": {"annotations": {RECONCILE_REQUESTED_AT: "tok-1"}}})
    assert step.unhandled_token(asked) == "tok-1"
    out = step.reconcile_step(REC, kapi, asked, "Running")
    assert out.token == "tok-1" and out.obj["status"]["lastHandledReconcileAt"] == "tok-1"
    assert out.obj["metadata"]["resourceVersion"] != first.obj["metadata"]["resourceVersion"]
    assert step.reconcile_step(REC, kapi, out.obj, "Running").token is None


def test_a_run_that_lost_its_lease_writes_nothing_and_leaves_the_key_alone(make, kapi):
    obj = make(mode="ok")
    out = step.reconcile_step(REC, kapi, obj, None, lease_held=lambda: False)
    assert (out.result, out.queue, out.error_class) == ("error", QueueAction.KEEP, "LeaseLost")
    assert "phase" not in (live(kapi, obj).get("status") or {})


def test_a_phase_written_but_not_recorded_is_handed_back_first(make, kapi):
    obj = make(mode="ok")
    done = step.reconcile_step(REC, kapi, obj, None).obj
    # written by a run of ours that died before its record: what its write returned is the proof
    lost = kube.request_json(kapi, "PATCH", kube.object_path(GADGET, obj["metadata"]["namespace"], "g", "status"),
                             query={"fieldManager": FIELD_MANAGER}, content_type=kube.MERGE_PATCH,
                             body={"status": {"phase": "Failed", "reason": "Died"}})
    # without the proof the field manager's name is only a claim: out of band, not handed back
    assert step.reconcile_step(REC, kapi, lost, "Running").out_of_band.manager == FIELD_MANAGER
    lost = kube.request_json(kapi, "PATCH", kube.object_path(GADGET, obj["metadata"]["namespace"], "g", "status"),
                             query={"fieldManager": FIELD_MANAGER}, content_type=kube.MERGE_PATCH,
                             body={"status": {"phase": "Failed", "reason": "Died"}})
    note = (lost["metadata"]["resourceVersion"], "Failed")
    out = step.reconcile_step(REC, kapi, lost, "Running", engine_wrote=lambda o: provenance.wrote_it(note, o))
    assert out.out_of_band is None
    assert (out.result, out.queue) == ("requeue", QueueAction.REQUEUE_NOW)
    assert out.change is not None and (out.change.to_phase, out.change.reason) == ("Failed", "Died")
    assert out.transitions == [PlannedTransition("Running", "Failed", "Died", "mode ok")]
    assert done["status"]["phase"] == "Running"


def test_deletion_goes_terminating_then_deleted_and_complete_removes_the_finalizer(make, kapi):
    obj = make(mode="ok")
    running = step.reconcile_step(REC, kapi, obj, None).obj
    kube.delete_object(kapi, GADGET, obj["metadata"]["namespace"], "g")
    deleting = live(kapi, running)
    out = step.reconcile_step(REC, kapi, deleting, "Running")
    assert (out.queue, out.change.to_phase) == (QueueAction.REQUEUE_NOW, "Terminating")
    out = step.reconcile_step(REC, kapi, out.obj, "Terminating")
    assert (out.result, out.change.to_phase, out.remove_finalizer) == ("success", "Deleted", True)
    assert live(kapi, obj) is not None  # the finalizer goes only once the caller has recorded Deleted
    step.complete(out)
    assert live(kapi, obj) is None


def test_an_illegal_phase_is_written_but_refused_on_the_plan_with_a_warning(make, kapi):
    obj = make(mode="ok")
    out = step.reconcile_step(REC, kapi, obj, "Terminating")
    assert out.refused and out.transitions == []
    assert [(e.type, e.reason) for e in out.events] == [("Warning", "IllegalTransition")]


def test_the_step_imports_no_django_celery_or_redis():
    code = ("import sys, reconcilers.engine.step; bad = [m for m in ('django', 'celery', 'redis', 'reconcilers.models')"
            " if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"}, cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stdout + done.stderr
