"""The anomalies a recording writes: a phase change the kind's state machine refused, and a phase another field
manager wrote into the live status (out of band). Both are written with the resource's row locked by the caller,
inside its transaction, and both are deduplicated: a run that sees the same refusal or the same foreign write
again gets the anomaly on record back, not a second one.
"""

from __future__ import annotations

from datetime import datetime

from reconcilers.core import actors
from reconcilers.core.statemachine import StateMachine
from reconcilers.engine.step import OutOfBand, PhaseChange
from reconcilers.models import Anomaly, AnomalyCategory, ReconcileRun, Resource


def anomaly_record(resource: Resource, change: PhaseChange, machine: StateMachine, run: ReconcileRun | None) -> int:
    """The Anomaly for this refused change at this generation: the existing one, or a new one."""
    existing = (
        Anomaly.objects.filter(
            resource=resource, from_phase=resource.phase, to_phase=change.to_phase, generation=resource.generation,
            category=AnomalyCategory.REFUSED,
        )
        .values_list("id", flat=True)
        .first()
    )
    if existing is not None:
        return existing
    if change.to_phase not in machine.states:
        detail = f"{change.to_phase!r} is not a state of the {machine.name} state machine"
    else:
        allowed = ", ".join(machine.successors(resource.phase)) or "none"
        detail = f"{machine.name} does not allow {resource.phase or '(none)'} -> {change.to_phase} (allowed: {allowed})"
    anomaly = Anomaly.objects.create(
        resource=resource,
        cluster=resource.cluster,
        from_phase=resource.phase,
        to_phase=change.to_phase,
        reason=change.reason[:255],
        message=change.message,
        detail=detail,
        generation=resource.generation,
        actor=change.actor,
        run=run,
    )
    return anomaly.id


def out_of_band_record(resource: Resource, foreign: OutOfBand, generation: int, at: datetime) -> int:
    """The Anomaly of a live phase the engine did not write (the record's phase is left alone, and no
    transition is recorded): actor `kube:<user>` (admission) or `manager:<name>` (a claim), what was written
    and its managedFields entry in `observed`. One row per write (the entry's time): a later run seeing the
    same write adds nothing. Not linked to the run that saw it: a manual request that run handled has nothing to
    do with it."""
    observed = {"phase": foreign.phase, "reason": foreign.reason, "message": foreign.message,
                "manager": foreign.manager, "operation": foreign.operation, "time": foreign.time,
                "subresource": foreign.subresource, "established": actors.established(foreign.actor)}
    existing = (Anomaly.objects.filter(resource=resource, category=AnomalyCategory.OUT_OF_BAND,
                                       to_phase=foreign.phase, actor=foreign.actor[:255],
                                       observed__time=foreign.time)
                .values_list("id", flat=True).first())
    if existing is not None:
        return existing
    via = f"{foreign.operation or 'a write'}{' of /' + foreign.subresource if foreign.subresource else ''}"
    who = (f"{foreign.established_by} (authenticated by the API server; field manager {foreign.manager!r})"
           if foreign.established_by else f"field manager {foreign.manager!r} (a claim, not verified)")
    detail = (f"status.phase {foreign.phase!r} was written by {who} ({via}"
              f"{', at ' + foreign.time if foreign.time else ''}), not by the engine: not recorded as a transition "
              f"and not built on; the reconcile went on from the phase on record ({resource.phase or '(none)'})")
    return Anomaly.objects.create(
        resource=resource, cluster=resource.cluster, from_phase=resource.phase, to_phase=foreign.phase[:63],
        reason=foreign.reason[:255],
        message=foreign.message, detail=detail, generation=generation, actor=foreign.actor[:255], run=None,
        category=AnomalyCategory.OUT_OF_BAND, observed=observed, created_at=at,
    ).id
