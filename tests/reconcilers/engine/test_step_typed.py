"""The step with a typed kind: the spec validated before the reconcile (InvalidSpec names each field, nothing
crashes), the typed spec in `ctx.spec`, `ctx.spec_changed`, and the kind's spec-change phase applied by the
engine so a naive reconciler does not jump Running → Degraded on a spec change."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import pytest
from pydantic import Field

from opsconsole.testing.cluster import CrdInstaller
from reconcilers.core.kind import KindModel
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.engine import kube, step
from reconcilers.engine.step import QueueAction

pytestmark = pytest.mark.integration

GADGET = ResourceKind("test.opsconsole.io", "v1", "typedgadgets", "TypedGadget")
MACHINE = StateMachine.build(
    "TypedGadget", states=("Pending", "Running", "Degraded", "Failed"), initial="Pending",
    transitions={"Pending": ("Running", "Degraded", "Failed"), "Running": ("Pending", "Degraded", "Failed"),
                 "Degraded": ("Pending", "Running", "Failed"), "Failed": ("Pending", "Running")})


class GadgetSpec(KindModel):
    mode: Literal["ok", "degraded", "pending", "failed"] = "ok"
    size: int = Field(1, ge=0, le=10)
    sleep_seconds: float = 0.0


class TypedGadget(Reconciler):
    """Naive: the phase is whatever spec.mode says, and it notes what the engine told it."""

    resource: ClassVar[ResourceKind] = GADGET
    state_machine: ClassVar[StateMachine] = MACHINE
    spec_model: ClassVar[Any] = GadgetSpec
    spec_change_phase: ClassVar[str | None] = "Pending"
    seen: ClassVar[list[tuple[Any, bool]]] = []

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        self.seen.append((ctx.spec, ctx.spec_changed))
        phase = {"ok": "Running", "degraded": "Degraded", "pending": "Pending", "failed": "Failed"}[ctx.spec.mode]
        return Result(phase, phase + "Now", f"size {ctx.spec.size}", status={"size": ctx.spec.size},
                      requeue_after=5.0 if phase == "Pending" else None)


@pytest.fixture
def rec():
    TypedGadget.seen = []
    return TypedGadget()


@pytest.fixture
def make(kapi, namespace):
    """Create a TypedGadget (its CRD generated from the kind: the phase enum has Degraded, the spec schema the
    model's constraints)."""
    CrdInstaller(kapi).ensure([TypedGadget])

    def create(name: str = "g", **spec: Any) -> dict[str, Any]:
        return kube.create_object(kapi, GADGET, {"apiVersion": GADGET.api_version, "kind": GADGET.kind,
                                                 "metadata": {"name": name, "namespace": namespace}, "spec": spec})

    return create


def run(rec, kapi, obj, recorded):
    meta = obj["metadata"]
    fresh = kube.get_object(kapi, GADGET, meta["namespace"], meta["name"])
    return step.complete(step.reconcile_step(rec, kapi, fresh, recorded))


def change_spec(kapi, obj, **spec):
    meta = obj["metadata"]
    return kube.patch_object(kapi, GADGET, meta["namespace"], meta["name"], {"spec": spec})


def test_the_reconciler_gets_the_typed_spec_with_defaults(rec, make, kapi):
    outcome = run(rec, kapi, make(sleepSeconds=0.5), None)
    spec, changed = rec.seen[-1]
    assert isinstance(spec, GadgetSpec) and spec.size == 1 and spec.sleep_seconds == 0.5 and changed is False
    assert outcome.phase == "Running" and outcome.status["size"] == 1


def test_an_invalid_spec_is_failed_naming_every_bad_field_and_the_reconciler_never_runs(rec, make, kapi):
    """An object stored under an older, looser schema, reconciled by a kind whose model is stricter now."""
    obj = make(mode="ok", size=5, sleepSeconds=2.5)
    with pytest.raises(kube.ApiException) as refused:  # what the CRD refuses never gets stored
        make("g2", size=11)
    assert refused.value.status == 422 and "spec.size" in refused.value.body

    class Stricter(GadgetSpec):
        mode: Literal["fast", "slow"] = "fast"
        size: int = Field(1, ge=0, le=2)
        sleep_seconds: int = 0

    class StricterGadget(TypedGadget):
        spec_model: ClassVar[Any] = Stricter

    outcome = run(StricterGadget(), kapi, obj, None)
    assert rec.seen == []
    assert outcome.phase == "Failed" and outcome.change.reason == "InvalidSpec"
    assert outcome.queue is QueueAction.FORGET and outcome.error_class == "PermanentError"
    message = outcome.status["message"]
    assert "spec.mode: Input should be 'fast' or 'slow' (got 'ok')" in message
    assert "spec.size: must be at most 2 (got 5)" in message and "spec.sleepSeconds:" in message
    assert outcome.conditions["Stalled"]["status"] == "True"


def test_a_spec_change_goes_through_the_spec_change_phase_before_the_concluded_one(rec, make, kapi):
    obj = make()
    assert run(rec, kapi, obj, None).phase == "Running"
    change_spec(kapi, obj, mode="degraded", size=3)
    through = run(rec, kapi, obj, "Running")
    assert rec.seen[-1][1] is True  # the reconciler was told
    assert (through.phase, through.change.reason) == ("Pending", "SpecChanged")
    assert through.status["message"] == "spec changed (generation 2): size 3"
    assert through.queue is QueueAction.REQUEUE_NOW
    assert [(t.from_phase, t.to_phase) for t in through.transitions] == [("Running", "Pending")]
    after = run(rec, kapi, obj, "Pending")
    assert rec.seen[-1][1] is False and (after.phase, after.change.reason) == ("Degraded", "DegradedNow")


def test_a_spec_change_concluding_the_spec_change_phase_is_labelled_so_and_keeps_its_requeue(rec, make, kapi):
    obj = make()
    run(rec, kapi, obj, None)
    change_spec(kapi, obj, mode="pending")
    outcome = run(rec, kapi, obj, "Running")
    assert (outcome.phase, outcome.change.reason) == ("Pending", "SpecChanged")
    assert outcome.queue is QueueAction.REQUEUE_AFTER and outcome.delay == 5.0


def test_a_spec_change_to_a_failed_state_or_without_a_declared_phase_is_not_rerouted(rec, make, kapi):
    obj = make()
    run(rec, kapi, obj, None)
    change_spec(kapi, obj, mode="failed")
    assert run(rec, kapi, obj, "Running").phase == "Failed"

    class Plain(TypedGadget):
        spec_change_phase: ClassVar[str | None] = None

    other = make("h")
    run(Plain(), kapi, other, None)
    change_spec(kapi, other, mode="degraded")
    assert run(Plain(), kapi, other, "Running").phase == "Degraded"
