"""Rolling a resource back to an earlier generation's spec: applying it, verifying it, escalating when it fails.

`rollback_apply` restores the spec recorded for a generation (`SpecRevision`) with a PUT under its own field
manager (`opsconsole-rollback`), so the generation it makes is recorded as a revision whose actor is the
rollback. In the same transaction, with the resource's row locked, it appends a `rollback.started` healing record
and sets the rollback state (in progress, its deadline). The runs of the restored generation then go through the
kind's rollback phase with the rollback as actor (`step`); `rollback_verify_locked` (called by the recording, in
the run's transaction) concludes it: a ready phase → `rollback.succeeded`; the failed phase → escalation. The
evaluator escalates when the deadline passes.

Escalation (`escalate_locked`): a `rollback.failed` (or `rollback.refused`) record, the state that says so (the
`RollbackFailed` condition follows), the `rollback_failed` anomaly (counted in opsconsole_anomalies_total, so the
alert fires) and a Warning Event. Never a second rollback in a row: the generation a rollback made is never
rolled back by the automatic path.

`rollback_due` decides the automatic path for one resource: a spec change (a generation that never reached a
ready phase) that led to the failed phase, to an anomaly, or to no ready phase within the kind's
`rollback_after_seconds`; the target is the newest earlier generation that reached a ready phase, never one older
than a pinned generation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from reconcilers.core.meta import ROLLBACK_FIELD_MANAGER
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import kube, metrics
from reconcilers.engine.healing import healing_of
from reconcilers.engine.healing.records import healing_append
from reconcilers.engine.healing.state import FAILED, IN_PROGRESS, REFUSED, SUCCEEDED
from reconcilers.models import HealingAction, HealingRecord, Resource, SpecRevision, Transition

AUTO = "auto"

log = logging.getLogger(__name__)


class RollbackRefused(Exception):
    """A rollback that cannot be done; `field` names the input at fault (for a 4xx naming it)."""

    def __init__(self, message: str, *, field: str = "generation", status: int = 409) -> None:
        super().__init__(message)
        self.message, self.field, self.status = message, field, status


@dataclass(frozen=True)
class Escalation:
    """A rollback that failed or could not be done, for what follows the commit (the Warning Event)."""

    resource_id: int
    key: str
    reason: str
    message: str


def transition_actor(actor: str, auto: bool) -> str:
    """The actor of the transitions a rollback's verification records: `rollback:auto` or `rollback:<actor>`."""
    return f"rollback:{AUTO}" if auto else f"rollback:{actor}"


def last_good_generation(resource_id: int, reconciler: Reconciler, *, below: int | None = None) -> int | None:
    """The newest generation (below `below`) that reached one of the kind's ready phases, or None."""
    rows = Transition.objects.filter(resource_id=resource_id, to_phase__in=reconciler.ready_phases)
    if below is not None:
        rows = rows.filter(generation__lt=below)
    return rows.aggregate(top=Max("generation"))["top"]


def generation_reached_ready(resource_id: int, reconciler: Reconciler, generation: int) -> bool:
    """Whether that generation of the resource reached a ready phase."""
    return Transition.objects.filter(resource_id=resource_id, generation=generation,
                                     to_phase__in=reconciler.ready_phases).exists()


def revision_spec(resource: Resource, generation: int) -> dict[str, Any] | None:
    """The spec recorded for one generation of the resource, or None."""
    return (SpecRevision.objects.filter(resource_uid=resource.uid, generation=generation)
            .values_list("spec", flat=True).first())


def rollback_apply(api: Any, reconciler: Reconciler, resource_id: int, to_generation: int, *, actor: str,
                   reason: str, auto: bool = False, now: datetime | None = None) -> HealingRecord:
    """Restore the spec of `to_generation` (see the module docstring). `actor` is who asked (`controller` for
    the automatic path, `user:<name>`). Raises RollbackRefused (nothing written) when it cannot be done."""
    now = now or timezone.now()
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        if resource.deleted:
            raise RollbackRefused("the resource is deleted", field="resource", status=409)
        if auto and resource.suspended:
            raise RollbackRefused("the resource is suspended", field="resource")
        if (resource.rollback or {}).get("state") == IN_PROGRESS:
            raise RollbackRefused(f"a rollback to generation {resource.rollback.get('to_generation')} is being "
                                  "verified", field="resource")
        if to_generation >= resource.generation or to_generation < 1:
            raise RollbackRefused(f"generation must be an earlier generation than the current "
                                  f"{resource.generation} (got {to_generation})", status=400)
        spec = revision_spec(resource, to_generation)
        if spec is None:
            raise RollbackRefused(f"no spec is on record for generation {to_generation}", status=400)
        obj = kube.get_object(api, reconciler.resource, resource.namespace or None, resource.name)
        if obj is None or obj["metadata"].get("uid") != resource.uid:
            raise RollbackRefused("the object is gone from the cluster", field="resource")
        current = int(obj["metadata"].get("generation") or 0)
        if (obj.get("spec") or {}) == spec:
            raise RollbackRefused(f"the current spec is already generation {to_generation}'s", status=400)
        meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        try:
            written = kube.request_json(api, "PUT", kube.object_path(reconciler.resource, resource.namespace or None,
                                                                       resource.name),
                                        query={"fieldManager": ROLLBACK_FIELD_MANAGER},
                                        body={**obj, "metadata": meta, "spec": spec})
        except kube.ApiException as exc:
            if exc.status == 409:
                raise RollbackRefused("the object changed meanwhile; try again", field="resource") from exc
            if exc.status in (400, 422):
                raise RollbackRefused(f"the API server refused the restored spec: {exc.reason}", status=400) from exc
            raise
        generation = int(written["metadata"].get("generation") or 0)
        healing = healing_of(reconciler)
        deadline = now + timedelta(seconds=healing.verify_seconds)
        message = (f"rolled back from generation {current} to the spec of generation {to_generation}: "
                   f"generation {generation}")
        record = healing_append(resource, HealingAction.ROLLBACK_STARTED, actor=actor, reason=reason,
                                message=message, target_generation=to_generation, at=now,
                                detail={"from_generation": current, "to_generation": to_generation,
                                        "generation": generation, "auto": auto, "deadline": deadline.isoformat(),
                                        "field_manager": ROLLBACK_FIELD_MANAGER})
        resource.rollback = {
            "state": IN_PROGRESS, "actor": transition_actor(actor, auto), "by": actor, "auto": auto,
            "from_generation": current, "to_generation": to_generation, "generation": generation,
            "started_at": now.isoformat(), "deadline": deadline.isoformat(), "reason": reason, "record": record.seq,
        }
        resource.save(update_fields=["rollback", "last_healing_seq", "last_transition_hash", "updated_at"])
        kind = resource.kind
        transaction.on_commit(lambda: metrics.ROLLBACKS.labels(kind, "started").inc())
    log.info("%s: %s (by %s)", resource, message, actor)
    return record


def rollback_verify_locked(resource: Resource, reconciler: Reconciler, now: datetime) -> Escalation | None:
    """After a run's transitions (the row locked, in its transaction; the caller saves the row): conclude the
    rollback being verified when the restored generation reached a ready phase (succeeded) or the failed one
    (escalation, returned for what follows the commit)."""
    rollback = resource.rollback or {}
    if rollback.get("state") != IN_PROGRESS or resource.generation != rollback.get("generation"):
        return None
    if resource.phase in reconciler.ready_phases:
        healing_append(resource, HealingAction.ROLLBACK_SUCCEEDED, actor=str(rollback.get("actor") or "controller"),
                       reason="the restored generation reached a ready phase",
                       message=f"generation {resource.generation} (the spec of generation "
                               f"{rollback.get('to_generation')}) is {resource.phase}",
                       target_generation=rollback.get("to_generation"), at=now,
                       detail={"phase": resource.phase, "seconds": _since(rollback, now)})
        resource.rollback = {**rollback, "state": SUCCEEDED, "finished_at": now.isoformat()}
        kind = resource.kind
        transaction.on_commit(lambda: metrics.ROLLBACKS.labels(kind, "succeeded").inc())
        return None
    if resource.phase == reconciler.failed_phase:
        return escalate_locked(resource, HealingAction.ROLLBACK_FAILED, f"the restored generation is "
                               f"{resource.phase}: {resource.reason}: {resource.message}"[:2000], now)
    return None


def escalate_locked(resource: Resource, action: str, why: str, now: datetime) -> Escalation:
    """Stop and hand over to a person (see the module docstring); the row locked, the caller saves it."""
    rollback = dict(resource.rollback or {})
    failed = action == HealingAction.ROLLBACK_FAILED
    record = healing_append(resource, action, actor="controller", reason=why,
                            message=("the rollback did not bring the resource back: " if failed
                                     else "no automatic rollback: ") + why,
                            target_generation=rollback.get("to_generation"), at=now,
                            detail={"generation": resource.generation, "rollback": rollback or None})
    resource.rollback = {**rollback, "state": FAILED if failed else REFUSED, "generation": resource.generation,
                         "outcome": why, "finished_at": now.isoformat(), "record": record.seq}
    anomaly_raise_locked(resource, metrics.ROLLBACK_FAILED_RULE, why, now)
    kind = resource.kind
    transaction.on_commit(lambda: metrics.ROLLBACKS.labels(kind, "failed" if failed else "refused").inc())
    reason = "RollbackFailed" if failed else "RollbackRefused"
    return Escalation(resource.id, resource.key, reason, f"{reason}: {why}; a person must decide")


def anomaly_raise_locked(resource: Resource, rule: str, message: str, now: datetime,
                         evidence: dict[str, Any] | None = None) -> HealingRecord | None:
    """Record that `rule` matches the resource (once while it keeps matching); the caller saves the row."""
    active = dict(resource.active_anomalies or {})
    if rule in active:
        return None
    record = healing_append(resource, HealingAction.ANOMALY_DETECTED, actor="controller", rule=rule,
                            reason=f"rule {rule} matched", message=message, at=now, detail=evidence or {})
    active[rule] = {"since": now.isoformat(), "message": message[:500], "record": record.seq}
    resource.active_anomalies = active
    kind = resource.kind
    transaction.on_commit(lambda: metrics.ANOMALIES.labels(kind, rule).inc())
    return record


def anomaly_clear_locked(resource: Resource, rule: str, why: str, now: datetime) -> HealingRecord | None:
    """Record that `rule` no longer matches; the caller saves the row."""
    active = dict(resource.active_anomalies or {})
    if rule not in active:
        return None
    since = active.pop(rule).get("since")
    record = healing_append(resource, HealingAction.ANOMALY_CLEARED, actor="controller", rule=rule, reason=why,
                            message=f"rule {rule} no longer matches", at=now, detail={"since": since})
    resource.active_anomalies = active
    return record


def rollback_due(resource: Resource, reconciler: Reconciler, now: datetime) -> tuple[str, str] | None:
    """Why the automatic path should act on this resource now — ("rollback", why) or ("refuse", why) — or None.
    The caller checked that automatic rollback is on and the resource is not suspended."""
    healing = healing_of(reconciler)
    rollback = resource.rollback or {}
    if rollback.get("state") == IN_PROGRESS:
        return None
    if rollback and rollback.get("generation") == resource.generation:
        return None  # this generation is a rollback's, or was escalated already: never twice in a row
    if resource.phase in reconciler.ready_phases or resource.generation <= 1:
        return None
    if generation_reached_ready(resource.id, reconciler, resource.generation):
        return None  # it broke after it had worked: not a bad spec change
    why = _trigger(resource, reconciler, healing.rollback_after_seconds, now)
    if why is None:
        return None
    target = last_good_generation(resource.id, reconciler, below=resource.generation)
    if target is None:
        return "refuse", f"{why}; no earlier generation reached a ready phase"
    if resource.pinned_generation is not None and target < resource.pinned_generation:
        return "refuse", (f"{why}; the last good generation {target} is older than generation "
                          f"{resource.pinned_generation}, which is pinned")
    return "rollback", why


def _trigger(resource: Resource, reconciler: Reconciler, after_seconds: float, now: datetime) -> str | None:
    generation = resource.generation
    if resource.phase == reconciler.failed_phase:
        return f"generation {generation} led to {resource.phase} ({resource.reason})"
    rules = {rule.name: rule for rule in healing_of(reconciler).rules or ()}
    matched = [name for name in sorted(resource.active_anomalies or {}) if rules.get(name) and rules[name].rollback]
    if matched:
        return f"generation {generation} led to the anomaly {', '.join(matched)}"
    seen = (SpecRevision.objects.filter(resource_uid=resource.uid, generation=generation)
            .values_list("created_at", flat=True).first())
    if seen is not None and now - seen > timedelta(seconds=after_seconds):
        return f"generation {generation} reached no ready phase within {after_seconds:g}s"
    return None


def _since(rollback: dict[str, Any], now: datetime) -> float | None:
    started = rollback.get("started_at")
    try:
        return round((now - datetime.fromisoformat(started)).total_seconds(), 3) if started else None
    except ValueError:
        return None
