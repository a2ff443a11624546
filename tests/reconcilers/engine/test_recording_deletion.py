"""resource_deletions_record and resource_mirror_sweep: an object found gone gets its deletion recorded once,
chained, through the kind's terminating phase when its machine goes that way, as an Anomaly when the machine
refuses it, only marked deleted when the machine has no deletion phases; a sweep records the live rows a list no
longer has, and not rows newer than the list or in another namespace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.engine.audit import chain_verify
from reconcilers.engine.recording import (
    Deletion,
    resource_deletions_record,
    resource_mirror_sweep,
    resource_mirror_upsert,
)
from reconcilers.models import Anomaly, Resource, Transition
from tests.reconcilers.audit_support import KIND, MACHINE, observed, record

pytestmark = pytest.mark.django_db


class Plain(Reconciler):
    resource = KIND
    state_machine = MACHINE

    def reconcile(self, ctx: Any, obj: dict[str, Any]) -> Result:
        return Result()


class Direct(Plain):
    """A machine that may leave Running for Deleted straight, and has a state with no way out (Frozen)."""

    state_machine = StateMachine.build(
        "direct", states=["Pending", "Running", "Frozen", "Deleted"], initial="Pending",
        transitions={"Pending": ["Running", "Frozen"], "Running": ["Deleted"]}, terminal=["Deleted"])


class NoDeletionPhases(Plain):
    state_machine = StateMachine.build("bare", states=["Pending", "Running"], initial="Pending",
                                       transitions={"Pending": ["Running"]})


def phases(uid: str) -> list[tuple[str, str, str]]:
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq")
                .values_list("from_phase", "to_phase", "reason"))


def api_object(uid: str, name: str = "", namespace: str = "default", rv: str = "900", phase: str = "Running"):
    return {"apiVersion": KIND.api_version, "kind": KIND.kind,
            "metadata": {"name": name or f"m-{uid}", "namespace": namespace, "uid": uid, "resourceVersion": rv,
                         "generation": 3},
            "spec": {"size": 2}, "status": {"phase": phase}}


def test_a_running_object_goes_through_terminating_to_deleted_once_chained_and_marked_deleted():
    record(observed("u1"), "Running")
    added = resource_deletions_record([Deletion(Plain(), "u1", api_object("u1"), "deleted from the cluster")])
    assert [t.to_phase for t in added] == ["Terminating", "Deleted"]
    assert phases("u1")[-2:] == [("Running", "Terminating", "ObjectDeleted"),
                                 ("Terminating", "Deleted", "ObjectDeleted")]
    row = Resource.objects.get(uid="u1")
    assert row.deleted and row.deleted_at and row.phase == "Deleted" and row.reason == "ObjectDeleted"
    assert row.generation == 3 and row.resource_version == "900"  # the last state seen went to the mirror
    last = Transition.objects.get(resource_uid="u1", to_phase="Deleted")
    assert last.actor == "unknown" and last.run_id is None and last.generation == 3
    assert "last observed phase Running, generation 3, resourceVersion 900" in last.message
    assert chain_verify("u1").ok

    # replayed, or found gone again by a reconcile or a sweep: nothing more
    assert resource_deletions_record([Deletion(Plain(), "u1", api_object("u1"))]) == []
    assert resource_deletions_record([Deletion(Plain(), "u1")]) == []
    assert len(phases("u1")) == 4 and chain_verify("u1").ok


def test_a_deletion_the_finalizer_flow_recorded_gets_nothing_more_and_terminating_goes_on_to_deleted():
    record(observed("fin"), "Running")
    record(observed("fin"), "Terminating")
    record(observed("fin"), "Deleted", reason="Finalized")
    assert resource_deletions_record([Deletion(Plain(), "fin")]) == []
    assert Resource.objects.get(uid="fin").deleted

    record(observed("term"), "Running")
    record(observed("term"), "Terminating", reason="Deleting")
    added = resource_deletions_record([Deletion(Plain(), "term")])
    assert [(t.from_phase, t.to_phase) for t in added] == [("Terminating", "Deleted")]


def test_an_object_never_reconciled_enters_the_initial_phase_first_and_one_without_a_row_gets_one():
    resource_mirror_upsert(KIND, api_object("new", phase=""))
    resource_deletions_record([Deletion(Plain(), "new"), Deletion(Plain(), "unseen", api_object("unseen"))])
    for uid in ("new", "unseen"):
        assert [p[:2] for p in phases(uid)] == [("", "Pending"), ("Pending", "Terminating"),
                                                ("Terminating", "Deleted")]
        assert Resource.objects.get(uid=uid).deleted
        assert chain_verify(uid).ok
    assert resource_deletions_record([Deletion(Plain(), "nobody")]) == []  # no row, no last state: nothing


def test_a_machine_that_goes_straight_to_deleted_and_one_that_refuses_it():
    record(observed("d1"), "Running")
    resource_deletions_record([Deletion(Direct(), "d1")])
    assert [p[:2] for p in phases("d1")][-1:] == [("Running", "Deleted")]

    record(observed("f1"), "Pending")
    Resource.objects.filter(uid="f1").update(phase="Frozen")  # as if recorded (the chain is not checked here)
    assert resource_deletions_record([Deletion(Direct(), "f1")]) == []
    anomaly = Anomaly.objects.get(resource__uid="f1")
    assert (anomaly.from_phase, anomaly.to_phase, anomaly.reason) == ("Frozen", "Deleted", "ObjectDeleted")
    assert Resource.objects.get(uid="f1").deleted
    resource_deletions_record([Deletion(Direct(), "f1")])
    assert Anomaly.objects.filter(resource__uid="f1").count() == 1


def test_a_machine_without_deletion_phases_only_marks_the_row_deleted():
    record(observed("b1"), "Pending")
    assert resource_deletions_record([Deletion(NoDeletionPhases(), "b1")]) == []
    row = Resource.objects.get(uid="b1")
    assert row.deleted and row.phase == "Pending"


def test_a_sweep_records_the_live_rows_the_list_does_not_have_and_nothing_newer_or_elsewhere():
    for uid, ns in (("kept", "a"), ("ghost", "a"), ("other-ns", "b")):
        record(observed(uid, namespace=ns), "Running")
    listed_at = datetime.now(UTC)
    record(observed("newer", namespace="a"), "Running")
    Resource.objects.filter(uid="newer").update(created_at=listed_at + timedelta(seconds=1))

    assert resource_mirror_sweep(Plain(), {"kept"}, namespace="a", listed_at=listed_at) == ["ghost"]
    assert set(Resource.objects.filter(deleted=False).values_list("uid", flat=True)) == {"kept", "other-ns", "newer"}
    assert Resource.objects.get(uid="ghost").phase == "Deleted"
    assert "not in the cluster's list" in Transition.objects.get(resource_uid="ghost", to_phase="Deleted").message
    assert resource_mirror_sweep(Plain(), {"kept"}, namespace="a", listed_at=listed_at) == []  # once
    assert chain_verify().ok
