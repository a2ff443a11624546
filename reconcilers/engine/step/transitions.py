"""The record's and the object's side of a phase change: the manual-reconcile request a run handles, the
transitions the state machine walks from the phase on record, and the Events they post. No Django, Celery or
Redis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconcilers.core.meta import (
    FLUX_REQUESTED_AT,
    LAST_HANDLED_RECONCILE_AT,
    RECONCILE_REQUESTED_AT,
    request_annotation,
)
from reconcilers.core.reconciler import Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.engine.kstatus import condition_reason
from reconcilers.engine.step.outcome import EventSpec, PhaseChange, PlannedTransition

#: the annotations that ask for a manual reconcile (the runner passes what the settings allow)
REQUEST_ANNOTATIONS: tuple[str, ...] = (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT)


def unhandled_token(obj: dict[str, Any], annotations: tuple[str, ...] = REQUEST_ANNOTATIONS) -> str | None:
    """The manual-reconcile token the object asks for and its status has not handled yet, or None."""
    asked = unhandled_request(obj, annotations)
    return asked[1] if asked else None


def unhandled_request(obj: dict[str, Any], annotations: tuple[str, ...] = REQUEST_ANNOTATIONS
                      ) -> tuple[str, str] | None:
    """(annotation, token) of the newest manual-reconcile request on the object (`meta.request_annotation`)
    when its status has not handled it yet (`status.lastHandledReconcileAt`, for either spelling), or None."""
    asked = request_annotation(obj, annotations)
    if asked and asked[1] != (obj.get("status") or {}).get(LAST_HANDLED_RECONCILE_AT):
        return asked
    return None


def plan_transitions(machine: StateMachine, recorded: str | None, change: PhaseChange
                     ) -> tuple[list[PlannedTransition], bool]:
    """The transitions the record gets for `change` from the phase on record, and whether the machine refuses
    the change. A first phase other than the initial one enters the initial one first ("Initialized")."""
    phases, refused = machine.path(recorded, change.to_phase)
    out: list[PlannedTransition] = []
    source = recorded or ""
    for phase in phases:
        if phase == change.to_phase:
            out.append(PlannedTransition(source, phase, change.reason, change.message))
        else:
            out.append(PlannedTransition(source, phase, "Initialized",
                                         f"first recorded phase, on the way to {change.to_phase}"))
        source = phase
    return out, refused


def events_for(reconciler: Reconciler, transitions: Sequence[Any]) -> list[EventSpec]:
    """One Event per transition (anything with from_phase, to_phase, reason, message): Warning into the failed
    phase or a warning phase, Normal otherwise."""
    warning = {reconciler.failed_phase, *reconciler.warning_phases}
    out = []
    for row in transitions:
        text = f"{row.from_phase or '(new)'} -> {row.to_phase}"
        out.append(EventSpec("Warning" if row.to_phase in warning else "Normal",
                             condition_reason(row.reason or "", row.to_phase),
                             f"{text}: {row.message}" if row.message else text))
    return out


def refused_event(from_phase: str, to_phase: str, anomaly_id: int | None = None) -> EventSpec:
    """The Warning for a phase change the state machine refused (naming its anomaly once recorded)."""
    where = f" (anomaly {anomaly_id})" if anomaly_id is not None else ""
    return EventSpec("Warning", "IllegalTransition",
                     f"refused {from_phase or '(none)'} -> {to_phase}: the state machine does not allow it{where}")
