"""The Reconciler base class: a kind that declares none of the optional hooks gets their defaults, and one
that declares them keeps its own."""

from __future__ import annotations

from typing import Any, ClassVar

from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.kinds.memcached import POD, MemcachedReconciler
from reconcilers.kinds.tenant import ADMIN_CLUSTER_ROLE, TenantReconciler

THING = ResourceKind("example.com", "v1", "things", "Thing")


class ThingReconciler(Reconciler):
    resource: ClassVar[ResourceKind] = THING
    state_machine: ClassVar[StateMachine] = StateMachine.build(
        "Thing", states=("Pending", "Running"), initial="Pending", transitions={"Pending": ("Running",)})

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result("Running")


def test_a_reconciler_without_the_optional_hooks_has_their_defaults() -> None:
    rec = ThingReconciler()
    assert rec.ready_phases == ("Running", "Ready")
    assert rec.warning_phases == ("Degraded",)
    assert rec.rbac_reads == ()
    assert rec.rbac_binds == ()
    assert (rec.owns, rec.finalizer, rec.failed_phase) == ((), None, "Failed")
    assert rec.name == "thing"


def test_a_kind_that_declares_the_hooks_keeps_its_own() -> None:
    assert MemcachedReconciler.ready_phases == ("Running",) and MemcachedReconciler.rbac_reads == (POD,)
    assert TenantReconciler.rbac_binds == (ADMIN_CLUSTER_ROLE,) and TenantReconciler.rbac_reads == ()
