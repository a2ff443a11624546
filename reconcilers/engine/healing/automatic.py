"""The automatic side of rollback, one step per kind: concluding what has run its course and rolling back (or
escalating) a spec change that went wrong, where automatic rollback is on.

The evaluator calls `conclude` then `automatic` once per kind and step; `rollback` holds the rules they apply
(`rollback_due`, `rollback_apply`, `escalate_locked`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics
from reconcilers.engine.healing.report import HealReport
from reconcilers.engine.healing.rollback import (
    RollbackRefused,
    anomaly_clear_locked,
    escalate_locked,
    generation_reached_ready,
    last_good_generation,
    rollback_apply,
    rollback_due,
)
from reconcilers.engine.healing.state import FAILED, IN_PROGRESS, REFUSED, SUCCEEDED
from reconcilers.models import HealingAction, Resource, SpecRevision


def conclude(rec: Reconciler, live: Any, now: datetime, report: HealReport) -> None:
    """Conclude what has run its course: a rollback whose restored generation was not ready by its deadline is
    escalated; an escalation ends (and its `rollback_failed` anomaly clears) once a later generation is ready."""
    for rid, rollback, generation, phase in live.exclude(rollback__isnull=True).values_list(
            "id", "rollback", "generation", "phase"):
        state = (rollback or {}).get("state")
        deadline = _parse((rollback or {}).get("deadline"))
        overdue = (state == IN_PROGRESS and deadline is not None and deadline <= now
                   and generation == int(rollback.get("generation") or 0))
        later_ready = (state in (FAILED, REFUSED) and generation > int(rollback.get("generation") or 0)
                       and phase in rec.ready_phases)
        # a person's later change ends a rollback's story (its verification, or its success)
        superseded = state in (SUCCEEDED, IN_PROGRESS) and generation > int(rollback.get("generation") or 0)
        if not (overdue or later_ready or superseded):
            continue
        with transaction.atomic():
            row = Resource.objects.select_for_update().get(pk=rid)
            if row.rollback != rollback:
                continue
            if overdue:
                report.escalations.append(escalate_locked(
                    row, HealingAction.ROLLBACK_FAILED, f"the restored generation {rollback.get('generation')} "
                    f"reached no ready phase by {rollback.get('deadline')} (it is {row.phase or 'unrecorded'})",
                    now))
            else:
                if later_ready and anomaly_clear_locked(row, metrics.ROLLBACK_FAILED_RULE,
                                                        f"generation {row.generation} is {row.phase}", now):
                    report.cleared += 1
                row.rollback = None
            row.save(update_fields=["rollback", "active_anomalies", "last_healing_seq", "last_transition_hash",
                                    "updated_at"])
            report.keys.append(row.key)


def automatic(api: Any, rec: Reconciler, live: Any, after_seconds: float, now: datetime, report: HealReport, *,
              settled: set[tuple[int, int]], enabled: Callable[[Reconciler, Resource], bool]) -> None:
    """The automatic path, where it is on (`enabled`) and the resource is not suspended: `rollback_due` says
    whether to roll back (`rollback_apply`) or to escalate. `settled` remembers (resource, generation) pairs that
    reached a ready phase (not a bad change), across steps."""
    stale = SpecRevision.objects.filter(resource_uid=OuterRef("uid"), generation=OuterRef("generation"),
                                        created_at__lt=now - timedelta(seconds=after_seconds))
    candidates = (live.filter(suspended=False, generation__gt=1).exclude(phase__in=rec.ready_phases)
                  .filter(Q(phase=rec.failed_phase) | ~Q(active_anomalies={}) | Exists(stale)))
    for resource in candidates:
        settled = (resource.id, resource.generation)
        if settled in settled:
            continue
        if (resource.rollback or {}).get("generation") == resource.generation:
            continue
        if generation_reached_ready(resource.id, rec, resource.generation):
            settled.add(settled)
            continue
        if not enabled(rec, resource):
            continue
        due = rollback_due(resource, rec, now)
        if due is None:
            continue
        what, why = due
        if what == "rollback":
            target = last_good_generation(resource.id, rec, below=resource.generation)
            try:
                rollback_apply(api, rec, resource.id, int(target or 0), actor="controller", reason=why,
                               auto=True, now=now)
            except RollbackRefused as exc:
                if exc.field == "resource" and exc.status == 409 and "changed" in exc.message:
                    continue  # tried again next step
                why = f"{why}; the rollback could not be done: {exc.message}"
            else:
                report.rollbacks += 1
                report.keys.append(resource.key)
                continue
        with transaction.atomic():
            row = Resource.objects.select_for_update().get(pk=resource.id)
            if (row.rollback or {}).get("generation") == row.generation:
                continue
            report.escalations.append(escalate_locked(row, HealingAction.ROLLBACK_REFUSED, why, now))
            row.save(update_fields=["rollback", "active_anomalies", "last_healing_seq", "last_transition_hash",
                                    "updated_at"])
            report.keys.append(row.key)


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
