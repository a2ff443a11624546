"""Anomaly rules matched against the record, and the anomalies they raise and clear.

`match_rules` matches a kind's rules against the record — the Events archive (`events` rules: the occurrences
summed over the window), the transitions of the kind in its group (`flapping`: a kind of the same name in another
group is another kind), the resources' phases and since when (`stuck`) — with one aggregate query per rule;
`record_matches` records each rule that starts or stops matching a resource (an `anomaly.detected` /
`anomaly.cleared` healing record, the resource's active anomalies, the counter). The evaluator calls both once per
kind and step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Sum

from reconcilers.core.healing import EVENTS, FLAPPING, METRICS, STUCK, AnomalyRule
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics
from reconcilers.engine.healing.metric_rules import MetricState, metric_matches
from reconcilers.engine.healing.report import HealReport
from reconcilers.engine.healing.rollback import anomaly_clear_locked, anomaly_raise_locked
from reconcilers.models import KubeEvent, Resource, Transition

#: how much evidence an anomaly record keeps (the newest matching Events)
EVIDENCE_EVENTS = 5


def match_rules(rec: Reconciler, rules: Sequence[AnomalyRule], live: Any, now: datetime, *,
                metric_state: MetricState | None = None) -> dict[int, dict[str, tuple[str, dict[str, Any]]]]:
    """{resource id: {rule: (message, evidence)}} for every rule matching now (`metric_state`: the evaluator's
    memory of the metric rules' evaluations, `metric_rules`)."""
    out: dict[int, dict[str, tuple[str, dict[str, Any]]]] = defaultdict(dict)
    for rule in rules:
        if rule.type == EVENTS:
            for rid, count in events_matching(rec, rule, now).items():
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
        elif rule.type == METRICS:
            for rid, match in metric_matches(rec, rule, live, now, metric_state).items():
                out[rid][rule.name] = match
    return out


def events_matching(rec: Reconciler, rule: AnomalyRule, now: datetime) -> dict[int, int]:
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


def record_matches(live: Any, matches: dict[int, dict[str, tuple[str, dict[str, Any]]]], now: datetime,
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
                evidence = {**evidence, "events": evidence_events(rid, now)}
                if anomaly_raise_locked(row, rule, message, now, evidence) is not None:
                    report.detected += 1
            for rule in sorted(current - set(wanted)):
                if anomaly_clear_locked(row, rule, "the rule no longer matches", now) is not None:
                    report.cleared += 1
            row.save(update_fields=["active_anomalies", "last_healing_seq", "last_transition_hash",
                                    "updated_at"])
            report.keys.append(row.key)


def evidence_events(rid: int, now: datetime) -> list[dict[str, Any]]:
    rows = (KubeEvent.objects.filter(resource_id=rid, type="Warning").order_by("-last_timestamp", "-id")
            .values("involved_kind", "involved_name", "reason", "message", "count", "last_timestamp")
            [:EVIDENCE_EVENTS])
    return [{**row, "last_timestamp": row["last_timestamp"].isoformat() if row["last_timestamp"] else None}
            for row in rows]
