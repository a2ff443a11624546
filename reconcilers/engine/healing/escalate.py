"""The anomaly and escalation links a healing step or a rollback appends, with the resource's row locked (the caller
saves it): an anomaly raised (`anomaly.detected`, once while its rule keeps matching) or cleared, and an escalation.

Escalation (`escalate_locked`): a `rollback.failed` (or `rollback.refused`) record, the rollback state that says so
(the `RollbackFailed` condition follows), the `rollback_failed` anomaly (counted in opsconsole_anomalies_total, so
the alert fires) and, after the commit, a Warning Event (`Escalation`). A rollback's own failure carries its actor;
the engine's refusal to roll back is the controller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from reconcilers.engine import metrics
from reconcilers.engine.healing.records import healing_append
from reconcilers.engine.healing.state import FAILED, REFUSED, WRITING
from reconcilers.models import HealingAction, HealingRecord, Resource


@dataclass(frozen=True)
class Escalation:
    """A rollback that failed or could not be done, for what follows the commit (the Warning Event)."""

    resource_id: int
    key: str
    reason: str
    message: str


def escalate_locked(resource: Resource, action: str, why: str, now: datetime) -> Escalation:
    """Stop and hand over to a person (see the module docstring); the row locked, the caller saves it."""
    rollback = {k: v for k, v in (resource.rollback or {}).items() if k != "previous"}
    failed = action == HealingAction.ROLLBACK_FAILED
    # a rollback's own failure carries its actor; the engine's refusal to roll back is the controller's
    actor = str(rollback.get("actor") or "controller") if failed else "controller"
    prefix = ("no automatic rollback: " if not failed else "the rollback was not done: "
              if rollback.get("state") == WRITING else "the rollback did not bring the resource back: ")
    record = healing_append(resource, action, actor=actor, reason=why, message=prefix + why,
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
                         evidence: dict[str, Any] | None = None, *, entry: dict[str, Any] | None = None
                         ) -> HealingRecord | None:
    """Record that `rule` matches the resource (once while it keeps matching); the caller saves the row. `entry`:
    more fields of its `active_anomalies` entry (e.g. `generation`, `rollback_ok`: what `due` reads)."""
    active = dict(resource.active_anomalies or {})
    if rule in active:
        return None
    record = healing_append(resource, HealingAction.ANOMALY_DETECTED, actor="controller", rule=rule,
                            reason=f"rule {rule} matched", message=message, at=now, detail=evidence or {})
    active[rule] = {**(entry or {}), "since": now.isoformat(), "message": message[:500], "record": record.seq}
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
