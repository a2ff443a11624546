"""The healing evaluator: one step, run by the controller while it leads (every `OPSCONSOLE_HEALING_INTERVAL`).

For each registered kind, one step:
1. matches the kind's anomaly rules against the record — the Events archive (`events` rules: the occurrences
   summed over the window), the transitions of the kind in its group (`flapping`: a kind of the same name in
   another group is another kind), the resources' phases and since when (`stuck`) — with one aggregate query per
   rule, and records each rule that starts or stops matching a resource (an
   `anomaly.detected` / `anomaly.cleared` healing record, the resource's active anomalies, the counter);
2. concludes what has run its course: a rollback whose restored generation was not ready by its deadline is
   escalated; an escalation ends (and its `rollback_failed` anomaly clears) once a later generation is ready;
3. takes the automatic path where it is on (the kind, the settings or the object's annotation) and the resource
   is not suspended: `rollback.rollback_due` says whether to roll back (`rollback_apply`) or to escalate;
4. enqueues the keys whose conditions changed and those whose suspension has ended;
5. sets the gauges (`opsconsole_anomalies_active`, `opsconsole_resources_suspended`).

It imports the database and the API client but no Celery; the controller passes a cache of the objects'
annotations (its informers; the mirror's copy of the auto-rollback annotation otherwise), so the step makes no
API call of its own but the rollbacks and the escalations' Events.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Sum
from django.utils import timezone

from reconcilers.core.healing import EVENTS, FLAPPING, STUCK, AnomalyRule
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import kube, metrics
from reconcilers.engine.healing import auto_rollback_enabled, healing_of
from reconcilers.engine.healing.rollback import (
    Escalation,
    RollbackRefused,
    anomaly_clear_locked,
    anomaly_raise_locked,
    escalate_locked,
    generation_reached_ready,
    last_good_generation,
    rollback_apply,
    rollback_due,
)
from reconcilers.engine.healing.state import FAILED, IN_PROGRESS, REFUSED, SUCCEEDED
from reconcilers.models import HealingAction, KubeEvent, Resource, SpecRevision, Transition

log = logging.getLogger(__name__)

#: how much evidence an anomaly record keeps (the newest matching Events)
EVIDENCE_EVENTS = 5


def default_interval() -> float:
    """settings.OPSCONSOLE_HEALING_INTERVAL (seconds, default 2; 0: no healing step)."""
    from django.conf import settings

    return float(getattr(settings, "OPSCONSOLE_HEALING_INTERVAL", 2))


@dataclass
class HealReport:
    """What one step did."""

    detected: int = 0
    cleared: int = 0
    rollbacks: int = 0
    escalations: list[Escalation] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)

    @property
    def did(self) -> bool:
        """Whether it changed anything."""
        return bool(self.detected or self.cleared or self.rollbacks or self.escalations or self.keys)


class Evaluator:
    """The healing step over `reconcilers` (see the module docstring). `annotations(reconciler, resource)` gives
    an object's annotations from a cache (None: not cached, read through the API)."""

    def __init__(self, api: Any, reconcilers: Sequence[Reconciler], *,
                 annotations: Callable[[Reconciler, Resource], dict[str, Any] | None] | None = None,
                 enqueue: Callable[[list[str]], Any] | None = None) -> None:
        self.api = api
        self.reconcilers = list(reconcilers)
        self.annotations = annotations
        self.enqueue = enqueue
        self._settled: set[tuple[int, int]] = set()  # (resource, generation) that reached ready: not a bad change
        self._expiry_sent: dict[int, str] = {}
        for rec in self.reconcilers:
            try:
                metrics.healing_label_pairs_init(rec.resource.kind, [r.name for r in healing_of(rec).rules or ()])
            except Exception:  # a bad rule setting is reported by the step, not here
                log.debug("healing metrics not initialised for %s", rec.resource.kind, exc_info=True)

    def step(self, now: datetime | None = None) -> HealReport:
        """One round over every kind; a kind whose step fails is logged and the others go on."""
        now = now or timezone.now()
        report = HealReport()
        for rec in self.reconcilers:
            try:
                self._kind_step(rec, now, report)
            except Exception:
                log.warning("healing: the step for %s failed", rec.resource.kind, exc_info=True)
        for escalation in report.escalations:
            self._post_warning(escalation)
        if report.keys and self.enqueue is not None:
            try:
                self.enqueue(sorted(set(report.keys)))
            except Exception:
                log.warning("healing: could not enqueue %d keys", len(report.keys), exc_info=True)
        return report

    # -- one kind ------------------------------------------------------------------------------------------------

    def _kind_step(self, rec: Reconciler, now: datetime, report: HealReport) -> None:
        healing = healing_of(rec)
        live = Resource.objects.filter(group=rec.resource.group, plural=rec.resource.plural, deleted=False)
        matches = self._matches(rec, healing.rules or (), live, now)
        self._anomalies(live, matches, now, report)
        self._conclude(rec, live, now, report)
        self._automatic(rec, live, healing.rollback_after_seconds, now, report)
        self._expiries(live, now, report)
        self._gauges(rec, healing.rules or (), live)

    def _matches(self, rec: Reconciler, rules: Sequence[AnomalyRule], live: Any, now: datetime
                 ) -> dict[int, dict[str, tuple[str, dict[str, Any]]]]:
        """{resource id: {rule: (message, evidence)}} for every rule matching now."""
        out: dict[int, dict[str, tuple[str, dict[str, Any]]]] = defaultdict(dict)
        for rule in rules:
            if rule.type == EVENTS:
                for rid, count in self._events_matching(rec, rule, now).items():
                    out[rid][rule.name] = (f"{count} events ({'/'.join(rule.reasons)}) in {rule.window_seconds:g}s",
                                           {"occurrences": count, "window_seconds": rule.window_seconds})
            elif rule.type == FLAPPING:
                # by group and kind (through the resource): a kind of the same name in another group is not this one
                rows = (Transition.objects.filter(kind=rec.resource.kind, resource__group=rec.resource.group,
                                                  resource__plural=rec.resource.plural, from_phase=rule.from_phase,
                                                  to_phase=rule.to_phase,
                                                  created_at__gte=now - timedelta(seconds=rule.window_seconds))
                        .values("resource_id").annotate(n=Count("id")).filter(n__gte=rule.threshold))
                for row in rows:
                    out[row["resource_id"]][rule.name] = (
                        f"{row['n']} x {rule.from_phase} -> {rule.to_phase} in {rule.window_seconds:g}s",
                        {"transitions": row["n"], "window_seconds": rule.window_seconds})
            elif rule.type == STUCK:
                cutoff = now - timedelta(seconds=rule.seconds)
                for rid, since in live.filter(phase=rule.phase, phase_since__lt=cutoff).values_list("id",
                                                                                                   "phase_since"):
                    out[rid][rule.name] = (f"{rule.phase} since {since.isoformat()} (more than {rule.seconds:g}s)",
                                           {"phase": rule.phase, "since": since.isoformat()})
        return out

    def _events_matching(self, rec: Reconciler, rule: AnomalyRule, now: datetime) -> dict[int, int]:
        rows = KubeEvent.objects.filter(resource__group=rec.resource.group, resource__plural=rec.resource.plural,
                                        resource__deleted=False, reason__in=rule.reasons,
                                        last_timestamp__gte=now - timedelta(seconds=rule.window_seconds))
        if rule.types:
            rows = rows.filter(type__in=rule.types)
        if rule.involved == "children":
            rows = rows.exclude(involved_uid=F("resource__uid"))
        elif rule.involved == "self":
            rows = rows.filter(involved_uid=F("resource__uid"))
        found = rows.values("resource_id").annotate(n=Sum("occurrences")).filter(n__gte=rule.threshold)
        return {row["resource_id"]: int(row["n"]) for row in found}

    def _anomalies(self, live: Any, matches: dict[int, dict[str, tuple[str, dict[str, Any]]]], now: datetime,
                   report: HealReport) -> None:
        active = dict(live.exclude(active_anomalies={}).values_list("id", "active_anomalies"))
        for rid in sorted(set(matches) | set(active)):
            wanted = matches.get(rid, {})
            have = set(active.get(rid) or {}) - {metrics.ROLLBACK_FAILED_RULE}
            if set(wanted) == have:
                continue
            with transaction.atomic():
                row = Resource.objects.select_for_update().filter(pk=rid, deleted=False).first()
                if row is None:
                    continue
                current = set(row.active_anomalies or {}) - {metrics.ROLLBACK_FAILED_RULE}
                for rule in sorted(set(wanted) - current):
                    message, evidence = wanted[rule]
                    evidence = {**evidence, "events": self._evidence(rid, now)}
                    if anomaly_raise_locked(row, rule, message, now, evidence) is not None:
                        report.detected += 1
                for rule in sorted(current - set(wanted)):
                    if anomaly_clear_locked(row, rule, "the rule no longer matches", now) is not None:
                        report.cleared += 1
                row.save(update_fields=["active_anomalies", "last_healing_seq", "last_transition_hash",
                                        "updated_at"])
                report.keys.append(row.key)

    def _evidence(self, rid: int, now: datetime) -> list[dict[str, Any]]:
        rows = (KubeEvent.objects.filter(resource_id=rid, type="Warning").order_by("-last_timestamp", "-id")
                .values("involved_kind", "involved_name", "reason", "message", "count", "last_timestamp")
                [:EVIDENCE_EVENTS])
        return [{**row, "last_timestamp": row["last_timestamp"].isoformat() if row["last_timestamp"] else None}
                for row in rows]

    def _conclude(self, rec: Reconciler, live: Any, now: datetime, report: HealReport) -> None:
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

    def _automatic(self, rec: Reconciler, live: Any, after_seconds: float, now: datetime,
                   report: HealReport) -> None:
        stale = SpecRevision.objects.filter(resource_uid=OuterRef("uid"), generation=OuterRef("generation"),
                                            created_at__lt=now - timedelta(seconds=after_seconds))
        candidates = (live.filter(suspended=False, generation__gt=1).exclude(phase__in=rec.ready_phases)
                      .filter(Q(phase=rec.failed_phase) | ~Q(active_anomalies={}) | Exists(stale)))
        for resource in candidates:
            settled = (resource.id, resource.generation)
            if settled in self._settled:
                continue
            if (resource.rollback or {}).get("generation") == resource.generation:
                continue
            if generation_reached_ready(resource.id, rec, resource.generation):
                self._settled.add(settled)
                continue
            if not self._auto_rollback(rec, resource):
                continue
            due = rollback_due(resource, rec, now)
            if due is None:
                continue
            what, why = due
            if what == "rollback":
                target = last_good_generation(resource.id, rec, below=resource.generation)
                try:
                    rollback_apply(self.api, rec, resource.id, int(target or 0), actor="controller", reason=why,
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

    def _expiries(self, live: Any, now: datetime, report: HealReport) -> None:
        for rid, key, suspension in live.filter(suspended=True).values_list("id", "key", "suspension"):
            until = (suspension or {}).get("until")
            moment = _parse(until)
            if moment is not None and moment <= now and self._expiry_sent.get(rid) != until:
                self._expiry_sent[rid] = until
                report.keys.append(key)

    def _gauges(self, rec: Reconciler, rules: Sequence[AnomalyRule], live: Any) -> None:
        kind = rec.resource.kind
        counts: dict[str, int] = dict.fromkeys([r.name for r in rules] + [metrics.ROLLBACK_FAILED_RULE], 0)
        for anomalies in live.exclude(active_anomalies={}).values_list("active_anomalies", flat=True):
            for rule in anomalies or {}:
                counts[rule] = counts.get(rule, 0) + 1
        for rule, n in counts.items():
            metrics.ANOMALIES_ACTIVE.labels(kind, rule).set(n)
        metrics.SUSPENDED.labels(kind).set(live.filter(suspended=True).count())

    # -- around it -----------------------------------------------------------------------------------------------

    def _auto_rollback(self, rec: Reconciler, resource: Resource) -> bool:
        """Whether automatic rollback is on for the object: its annotation as the informer cache has it (the
        freshest), else as the mirror last saw it, else the kind's."""
        cached = self.annotations(rec, resource) if self.annotations is not None else None
        if cached is not None:
            return auto_rollback_enabled(rec, cached)
        if resource.auto_rollback is not None:
            return resource.auto_rollback
        return auto_rollback_enabled(rec, None)

    def _post_warning(self, escalation: Escalation) -> None:
        """The escalation's Warning Event about the object (best effort: the record is the record)."""
        from reconcilers.engine.context import EngineContext

        rec = next((r for r in self.reconcilers if escalation.key.startswith(
            f"{r.resource.group}/{r.resource.version}/{r.resource.plural}/")), None)
        resource = Resource.objects.filter(pk=escalation.resource_id).first()
        if rec is None or resource is None:
            return
        try:
            obj = kube.get_object(self.api, rec.resource, resource.namespace or None, resource.name)
            if obj is not None:
                EngineContext(rec, obj, self.api).event("Warning", escalation.reason, escalation.message)
        except Exception:
            log.warning("healing: could not post the %s event for %s", escalation.reason, resource, exc_info=True)


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
