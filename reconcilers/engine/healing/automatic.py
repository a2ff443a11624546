"""The automatic side of rollback, one step per kind: concluding what has run its course and rolling back (or
deferring, or escalating) a spec change that went wrong, where automatic rollback is on.

The evaluator calls `conclude` then `automatic` once per kind and step; `due` says when a rollback is due and to
which generation, `repeats` whether it is a re-apply of a spec rolled back before (deferred, then escalated), and
`rollback` holds the lifecycle (`rollback_apply`, `rollback_resolve`, `escalate_locked`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics
from reconcilers.engine.healing.due import generation_reached_ready, rollback_due
from reconcilers.engine.healing.escalate import anomaly_clear_locked, escalate_locked
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.engine.healing.repeats import defer, deferred_until, repeat_of
from reconcilers.engine.healing.report import HealReport
from reconcilers.engine.healing.rollback import WRITING_GRACE_SECONDS, RollbackRefused, rollback_apply, rollback_resolve
from reconcilers.engine.healing.state import DEFERRED, FAILED, IN_PROGRESS, REFUSED, SUCCEEDED, WRITING, moment
from reconcilers.models import HealingAction, Resource, SpecRevision

_SAVED = fields_to_save("rollback", "active_anomalies")

log = logging.getLogger(__name__)


def conclude(rec: Reconciler, live: Any, now: datetime, report: HealReport) -> None:
    """Conclude what has run its course: a rollback whose restored generation was not ready by its deadline is
    escalated; an escalation ends (and its `rollback_failed` anomaly clears) once a later generation is ready; a
    later generation ends a rollback's verification, its success or a deferral. (A rollback left `writing` is
    `resolve_writing`'s.)"""
    for rid, rollback, generation, phase in live.exclude(rollback__isnull=True).values_list(
            "id", "rollback", "generation", "phase"):
        state = (rollback or {}).get("state")
        deadline = moment((rollback or {}).get("deadline"))
        overdue = (state == IN_PROGRESS and deadline is not None and deadline <= now
                   and generation == int(rollback.get("generation") or 0))
        later_ready = (state in (FAILED, REFUSED) and generation > int(rollback.get("generation") or 0)
                       and phase in rec.ready_phases)
        # a person's later change ends a rollback's story (its verification, its success, its deferral)
        superseded = (state in (SUCCEEDED, IN_PROGRESS, DEFERRED)
                      and generation > int(rollback.get("generation") or 0))
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
                if superseded and state in (IN_PROGRESS, DEFERRED):
                    _superseded_locked(row, rollback, now)
                row.rollback = None
            row.save(update_fields=_SAVED)
            report.keys.append(row.key)


def _superseded_locked(row: Resource, rollback: dict[str, Any], now: datetime) -> None:
    """`rollback.superseded`: a later generation (someone's change) ended a rollback being verified, or a deferral,
    before it concluded; the story ends on record, neither a success nor a failure."""
    what = "being verified" if rollback.get("state") == IN_PROGRESS else "deferred"
    by = (SpecRevision.objects.filter(resource_uid=row.uid, generation=row.generation)
          .values_list("actor", flat=True).first()) or "unknown"
    healing_append(row, HealingAction.ROLLBACK_SUPERSEDED, actor="controller",
                   reason=f"generation {row.generation} (by {by}) superseded generation {rollback.get('generation')}",
                   message=f"the rollback {what} ended unconcluded: generation {row.generation} came after it",
                   target_generation=rollback.get("to_generation"), at=now,
                   detail={"state": rollback.get("state"), "generation": rollback.get("generation"),
                           "by": by, "rollback_id": rollback.get("id")})


def resolve_writing(api: Any, rec: Reconciler, live: Any, now: datetime, report: HealReport) -> None:
    """Every rollback (automatic or a person's) left `writing` for `WRITING_GRACE_SECONDS`: what became of its
    write, from the object (`rollback.rollback_resolve`). One that cannot be read yet is tried again next step."""
    for rid, key, rollback in live.filter(rollback__state=WRITING).values_list("id", "key", "rollback"):
        started = moment((rollback or {}).get("started_at"))
        if started is not None and now - started < timedelta(seconds=WRITING_GRACE_SECONDS):
            continue
        try:
            escalation = rollback_resolve(api, rec, rid, now)
        except Exception:
            log.warning("healing: the rollback being written on %s could not be resolved yet", key, exc_info=True)
            continue
        if escalation is not None:
            report.escalations.append(escalation)
        report.keys.append(key)


def automatic(api: Any, rec: Reconciler, live: Any, after_seconds: float, now: datetime, report: HealReport, *,
              settled: set[tuple[int, int]], enabled: Callable[[Reconciler, Resource], bool]) -> None:
    """The automatic path, where it is on (`enabled`) and the resource is not suspended: `rollback_due` says
    whether to roll back (`rollback_apply`) or to escalate; a re-apply of a spec rolled back before is deferred,
    then escalated if still due when the back-off ends, never rolled back again (`repeats`). `settled` remembers
    (resource, generation) pairs that reached a ready phase (not a bad change), across steps. Rollbacks left
    `writing` are resolved first (`resolve_writing`). A rollback is only ever about the generation it was decided
    for: the object moved on meanwhile, nothing is done (`rollback_apply`'s `about_generation`)."""
    resolve_writing(api, rec, live, now, report)
    stale = SpecRevision.objects.filter(resource_uid=OuterRef("uid"), generation=OuterRef("generation"),
                                        created_at__lt=now - timedelta(seconds=after_seconds))
    candidates = (live.filter(suspended=False, generation__gt=1).exclude(phase__in=rec.ready_phases)
                  .filter(Q(phase=rec.failed_phase) | ~Q(active_anomalies={}) | Exists(stale)))
    for resource in candidates:
        pair = (resource.id, resource.generation)
        if pair in settled:
            continue
        rollback = resource.rollback or {}
        if rollback.get("state") != DEFERRED and rollback.get("generation") == resource.generation:
            continue
        if generation_reached_ready(resource.id, rec, resource.generation):
            settled.add(pair)
            continue
        if not enabled(rec, resource):
            continue
        due = rollback_due(resource, rec, now)
        if due is None:
            continue
        why = due.why
        if due.what == "rollback":
            repeat = repeat_of(resource, now)
            if repeat is not None and repeat.escalates:
                why = f"{why}; {repeat.describe(resource.generation)}: a person must decide"
            else:
                if repeat is not None:
                    until = deferred_until(resource)
                    if until is None:
                        if defer(resource.id, resource.generation, repeat, why, now) is not None:
                            report.keys.append(resource.key)
                        continue
                    if now < until:
                        continue  # deferred: a fix may supersede it meanwhile
                    # still due when the back-off ended: rolling back again would only resume the fight
                    why = (f"{why}; {repeat.describe(resource.generation)}; still due when its back-off ended at "
                           f"{until.isoformat()}: a person must decide")
                else:
                    refused = _roll_back(api, rec, resource, due.detail, why, now, report)
                    if refused is None:
                        continue
                    why = refused
        _escalate(resource, why, now, report)


def _roll_back(api: Any, rec: Reconciler, resource: Resource, trigger: dict[str, Any], why: str, now: datetime,
               report: HealReport) -> str | None:
    """Roll back; None when that is the end of it for this step (done, tried again next step, or escalated by the
    rollback itself), else why it could not be done (the caller escalates)."""
    try:
        rollback_apply(api, rec, resource.id, int(trigger.get("target") or 0), actor="controller", reason=why,
                       auto=True, now=now, trigger={k: v for k, v in trigger.items() if k != "target"},
                       about_generation=resource.generation)
    except RollbackRefused as exc:
        if exc.escalation is not None:
            report.escalations.append(exc.escalation)
            report.keys.append(resource.key)
            return None
        if exc.field == "resource" and exc.status == 409 and "changed" in exc.message:
            return None  # tried again next step
        return f"{why}; the rollback could not be done: {exc.message}"
    report.rollbacks += 1
    report.keys.append(resource.key)
    return None


def _escalate(resource: Resource, why: str, now: datetime, report: HealReport) -> None:
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=resource.id)
        rollback = row.rollback or {}
        if rollback.get("state") in (WRITING, IN_PROGRESS) or (
                rollback.get("state") != DEFERRED and rollback.get("generation") == row.generation):
            return
        report.escalations.append(escalate_locked(row, HealingAction.ROLLBACK_REFUSED, why, now))
        row.save(update_fields=_SAVED)
        report.keys.append(row.key)

