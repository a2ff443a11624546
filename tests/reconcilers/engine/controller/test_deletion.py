"""The controller records deletions: a DELETED watch event of a reconciled kind records the deletion (through
the kind's state machine) in the batched mirror write, once; the first list sweeps the mirror's live rows the
cluster no longer has (objects deleted while no controller watched), not the ones it has."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import transaction

from reconcilers.core.reconciler import Context, Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.engine import kube
from reconcilers.engine.audit import chain_verify
from reconcilers.engine.controller import Controller
from reconcilers.engine.controller.events import DELETED, InformerEvent
from reconcilers.engine.controller.wiring import build_controller
from reconcilers.engine.recording import transition_append
from reconcilers.models import Resource, Transition
from tests.reconcilers.engine.controller.kinds import WIDGET, widget

pytestmark = pytest.mark.django_db

MACHINE = StateMachine.build(
    "widget", states=["Pending", "Running", "Terminating", "Deleted"], initial="Pending",
    transitions={"Pending": ["Running", "Terminating"], "Running": ["Terminating"], "Terminating": ["Deleted"]},
    terminal=["Deleted"])


class DeletableWidget(Reconciler):
    resource = WIDGET
    state_machine = MACHINE

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result()


@pytest.fixture
def controller(api, widget_kind):
    made = []

    def make() -> Controller:
        c = build_controller(api, [DeletableWidget()], enqueue=lambda key: True, pump=lambda: 0, mirror=True)
        made.append(c)
        c.step()  # leads (no elector): starts the informers
        assert c.wait_synced(10)
        return c

    yield make
    for c in made:
        c.shutdown()


def drive(controller, predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not controller.step():
            controller.handoff.wait(0.02)
        if predicate():
            return
    raise AssertionError("condition not met while driving the controller")


def running(uid: str) -> None:
    """What a worker would have recorded: Pending, then Running."""
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=uid)
        transition_append(row, to_phase="Pending")
        transition_append(row, to_phase="Running")
        row.save()


def to_phases(uid: str) -> list[str]:
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("to_phase", flat=True))


def test_a_deleted_event_records_the_deletion_once(api, ns, controller):
    c = controller()
    uid = kube.create_object(api, WIDGET, widget("w", ns))["metadata"]["uid"]
    drive(c, lambda: Resource.objects.filter(uid=uid).exists())
    running(uid)
    last = kube.get_object(api, WIDGET, ns, "w")

    kube.delete_object(api, WIDGET, ns, "w")
    drive(c, lambda: Resource.objects.get(uid=uid).deleted)
    assert to_phases(uid) == ["Pending", "Running", "Terminating", "Deleted"]
    assert Transition.objects.get(resource_uid=uid, to_phase="Deleted").reason == "ObjectDeleted"

    c.handle(InformerEvent(DELETED, WIDGET, last, last))  # replayed
    c.step()
    assert to_phases(uid) == ["Pending", "Running", "Terminating", "Deleted"]
    assert chain_verify(uid).ok


def test_the_first_list_records_the_rows_the_cluster_no_longer_has(api, ns, controller):
    first = controller()
    live_uid = kube.create_object(api, WIDGET, widget("live", ns))["metadata"]["uid"]
    ghost_uid = kube.create_object(api, WIDGET, widget("ghost", ns))["metadata"]["uid"]
    drive(first, lambda: Resource.objects.filter(uid__in=[live_uid, ghost_uid]).count() == 2)
    running(live_uid)
    running(ghost_uid)
    first.shutdown()  # nobody watches while it goes
    kube.delete_object(api, WIDGET, ns, "ghost")
    assert not Resource.objects.get(uid=ghost_uid).deleted

    second = controller()
    drive(second, lambda: Resource.objects.get(uid=ghost_uid).deleted)
    assert to_phases(ghost_uid) == ["Pending", "Running", "Terminating", "Deleted"]
    assert "not in the cluster's list" in Transition.objects.get(resource_uid=ghost_uid, to_phase="Deleted").message
    assert not Resource.objects.get(uid=live_uid).deleted and to_phases(live_uid) == ["Pending", "Running"]
    assert second.swept >= 1
    assert chain_verify().ok


def test_a_sweep_that_fails_is_tried_again(api, ns, widget_kind):
    calls = []

    def sweep(reconciler, present, namespace, listed_at):
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise RuntimeError("database away")
        return []

    now = [0.0]
    c = build_controller(api, [DeletableWidget()], enqueue=lambda key: True, pump=lambda: 0, mirror=True,
                         mirror_sweep=sweep, clock=lambda: now[0])
    try:
        c.step()
        assert c.wait_synced(10)
        drive(c, lambda: len(calls) == 1)
        c.step()
        assert len(calls) == 1  # waiting before the retry
        now[0] += 6
        drive(c, lambda: len(calls) == 2)
    finally:
        c.shutdown()
