"""Anomaly rules matched against the record, and the anomalies they raise and clear.

`match_rules` matches a kind's rules against the record, each about the resource's *current generation* only:
the Events archive (`events` rules: the occurrences of the Events attributed to the current generation and
observed after it was applied, summed over the window), the transitions of the current generation of the kind in
its group (`flapping`: a kind of the same name in another group is another kind), the resources' phases and since
when, counted from the current generation's application at the earliest (`stuck`) — with one aggregate query per
rule. `record_matches` records each rule that starts or stops matching a resource (an `anomaly.detected` /
`anomaly.cleared` healing record, the resource's active anomalies, the counter):

- each anomaly is about one generation (`generation` in its record's detail and in its `active_anomalies` entry)
  and says whether it may roll anything back (`rollback_ok`) and, when not, why (`why_not`): the rule says
  `rollback: false`, or an `events` rule about children whose Events the children's own state does not
  corroborate (`corroborate`; the Pods are read only then, and again when the evidence grew);
- an anomaly whose generation the resource has moved past is cleared as "superseded by generation N", and the new
  generation's rules start from zero;
- a rule a person resolved for the current generation (`Resource.anomalies_resolved`) is not raised again for it;
- the `rollback_failed` anomaly belongs to escalation and is left alone.

The evaluator calls both once per kind and step.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, F, OuterRef, Q, Subquery, Sum

from reconcilers.core.healing import EVENTS, FLAPPING, METRICS, STUCK, AnomalyRule
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics
from reconcilers.engine.healing.corroborate import corroborate, pod_reader
from reconcilers.engine.healing.escalate import anomaly_clear_locked, anomaly_raise_locked
from reconcilers.engine.healing.metric_rules import MetricState, metric_matches
from reconcilers.engine.healing.records import fields_to_save
from reconcilers.engine.healing.report import HealReport
from reconcilers.models import KubeEvent, Resource, SpecRevision, Transition

#: how many of the counted Events an anomaly record lists (the newest)
EVIDENCE_EVENTS = 20

Match = tuple[str, dict[str, Any]]


def applied_at(uid_field: str = "resource__uid", generation_field: str = "resource__generation") -> Subquery:
    """When the current generation was applied: its `SpecRevision`'s time (written by the engine after the first
    run of that generation applied its children; a generation with none yet has not been applied). By uid and
    generation: the revisions' unique index."""
    return Subquery(SpecRevision.objects.filter(resource_uid=OuterRef(uid_field),
                                                generation=OuterRef(generation_field))
                    .values("created_at")[:1])


def match_rules(rec: Reconciler, rules: Sequence[AnomalyRule], live: Any, now: datetime, *,
                metric_state: MetricState | None = None) -> dict[int, dict[str, Match]]:
    """{resource id: {rule: (message, evidence)}} for every rule matching now, about the current generation
    (`metric_state`: the evaluator's memory of the metric rules' evaluations, `metric_rules`)."""
    out: dict[int, dict[str, Match]] = defaultdict(dict)
    for rule in rules:
        if rule.type == EVENTS:
            for rid, (count, generation) in events_matching(rec, rule, now).items():
                out[rid][rule.name] = (f"{count} events ({'/'.join(rule.reasons)}) in {rule.window_seconds:g}s "
                                       f"about generation {generation}",
                                       {"occurrences": count, "window_seconds": rule.window_seconds,
                                        "generation": generation})
        elif rule.type == FLAPPING:
            # by group and kind (through the resource): a kind of the same name in another group is not this one
            rows = (Transition.objects.filter(kind=rec.resource.kind, resource__group=rec.resource.group,
                                              resource__plural=rec.resource.plural, resource__deleted=False,
                                              generation=F("resource__generation"), from_phase=rule.from_phase,
                                              to_phase=rule.to_phase,
                                              created_at__gte=now - timedelta(seconds=rule.window_seconds))
                    .values("resource_id", "generation").annotate(n=Count("id")).filter(n__gte=rule.threshold))
            for row in rows:
                out[row["resource_id"]][rule.name] = (
                    f"{row['n']} x {rule.from_phase} -> {rule.to_phase} in {rule.window_seconds:g}s "
                    f"(generation {row['generation']})",
                    {"transitions": row["n"], "window_seconds": rule.window_seconds, "generation": row["generation"]})
        elif rule.type == STUCK:
            cutoff = now - timedelta(seconds=rule.seconds)
            # since the current generation was applied, when that is later than the phase's start (no revision
            # on record: the phase's start)
            rows = (live.filter(phase=rule.phase, phase_since__lt=cutoff)
                    .annotate(applied=applied_at("uid", "generation"))
                    .filter(Q(applied__isnull=True) | Q(applied__lt=cutoff))
                    .values_list("id", "phase_since", "applied", "generation"))
            for rid, phase_since, applied, generation in rows:
                since = max(phase_since, applied) if applied is not None else phase_since
                out[rid][rule.name] = (f"{rule.phase} since {since.isoformat()} (more than {rule.seconds:g}s, "
                                       f"generation {generation})",
                                       {"phase": rule.phase, "since": since.isoformat(), "generation": generation})
        elif rule.type == METRICS:
            for rid, match in metric_matches(rec, rule, live, now, metric_state).items():
                out[rid][rule.name] = match
    return out


def _counted(rule: AnomalyRule, now: datetime) -> Any:
    """The archived Events an `events` rule counts: of its reasons and types, about whom it says, attributed to the
    resource's current generation, observed after that generation was applied, inside the window."""
    rows = KubeEvent.objects.filter(reason__in=rule.reasons, generation=F("resource__generation"),
                                    last_timestamp__gte=now - timedelta(seconds=rule.window_seconds),
                                    observed_at__gt=applied_at())
    if rule.types:
        rows = rows.filter(type__in=rule.types)
    if rule.involved == "children":
        rows = rows.exclude(involved_uid=F("resource__uid"))
    elif rule.involved == "self":
        rows = rows.filter(involved_uid=F("resource__uid"))
    return rows


def events_matching(rec: Reconciler, rule: AnomalyRule, now: datetime) -> dict[int, tuple[int, int]]:
    """{resource id: (occurrences, generation)} for the live resources of the kind the `events` rule matches."""
    rows = _counted(rule, now).filter(resource__group=rec.resource.group, resource__plural=rec.resource.plural,
                                      resource__deleted=False)
    found = (rows.values("resource_id", "generation").annotate(n=Sum("occurrences"))
             .filter(n__gte=rule.threshold))
    return {row["resource_id"]: (int(row["n"]), int(row["generation"])) for row in found}


def counted_events(rule: AnomalyRule, rid: int, now: datetime) -> list[dict[str, Any]]:
    """The newest EVIDENCE_EVENTS Events the rule counts for one resource, as evidence: uid, count, occurrences,
    reason, the involved object and the archived (clamped) times."""
    rows = (_counted(rule, now).filter(resource_id=rid).order_by("-last_timestamp", "-id")
            .values("event_uid", "count", "occurrences", "type", "reason", "involved_kind", "involved_namespace",
                    "involved_name", "involved_uid", "generation", "attribution", "first_timestamp",
                    "last_timestamp", "observed_at")[:EVIDENCE_EVENTS])
    return [{**row, **{k: row[k].isoformat() if row[k] else None
                       for k in ("first_timestamp", "last_timestamp", "observed_at")}} for row in rows]


def record_matches(live: Any, matches: Mapping[int, Mapping[str, Match]], now: datetime, report: HealReport, *,
                   api: Any = None, rules: Sequence[AnomalyRule] = ()) -> None:
    """Record what changed (see the module docstring). `rules`: the kind's rules (what a match may roll back, and
    the counted Events of an `events` rule); `api`: to read the Pods that corroborate an anomaly."""
    by_name = {rule.name: rule for rule in rules}
    active = dict(live.exclude(active_anomalies={}).values_list("id", "active_anomalies"))
    rids = sorted(set(matches) | set(active))
    if not rids:
        return
    state = {rid: (generation, resolved) for rid, generation, resolved in
             live.filter(id__in=rids).values_list("id", "generation", "anomalies_resolved")}
    judge = _Judge(by_name, api, now)
    for rid in rids:
        if rid not in state:
            continue
        if _plan(matches.get(rid, {}), active.get(rid) or {}, *state[rid], by_name).empty:
            continue
        with transaction.atomic():
            row = Resource.objects.select_for_update().filter(pk=rid, deleted=False).first()
            if row is None:
                continue
            plan = _plan(matches.get(rid, {}), row.active_anomalies or {}, row.generation,
                         row.anomalies_resolved or {}, by_name)
            if plan.empty:
                continue
            for rule, why in plan.clear.items():
                if anomaly_clear_locked(row, rule, why, now) is not None:
                    report.cleared += 1
            for rule, match in plan.raise_.items():
                if judge.raise_locked(row, rule, match):
                    report.detected += 1
            for rule, match in plan.rejudge.items():
                judge.again_locked(row, rule, match, report)
            row.save(update_fields=fields_to_save("active_anomalies"))
            report.keys.append(row.key)


class _Plan:
    """What one resource's anomalies need: rules to clear (with why), to raise, to judge again."""

    def __init__(self) -> None:
        self.clear: dict[str, str] = {}
        self.raise_: dict[str, Match] = {}
        self.rejudge: dict[str, Match] = {}

    @property
    def empty(self) -> bool:
        return not (self.clear or self.raise_ or self.rejudge)


def resolved_for(resolved: Mapping[str, Any], rule: str, generation: int) -> bool:
    """Whether a person resolved `rule` for `generation` (`Resource.anomalies_resolved`)."""
    entry = resolved.get(rule)
    return isinstance(entry, Mapping) and _int(entry.get("generation")) == generation


def _plan(matches: Mapping[str, Match], active: Mapping[str, Any], generation: int, resolved: Mapping[str, Any],
          by_name: Mapping[str, AnomalyRule]) -> _Plan:
    plan = _Plan()
    wanted = {rule: match for rule, match in matches.items()
              if _int(match[1].get("generation"), generation) == generation
              and not resolved_for(resolved, rule, generation)}
    for rule, entry in active.items():
        if rule == metrics.ROLLBACK_FAILED_RULE:
            continue
        entry = entry if isinstance(entry, Mapping) else {}
        if _int(entry.get("generation"), 0) != generation:
            plan.clear[rule] = f"superseded by generation {generation}"
        elif rule not in wanted:
            plan.clear[rule] = (f"resolved for generation {generation}" if resolved_for(resolved, rule, generation)
                                else "the rule no longer matches")
        elif _grew(entry, wanted[rule][1], by_name.get(rule)):
            plan.rejudge[rule] = wanted[rule]
    for rule, match in wanted.items():
        if rule not in active or rule in plan.clear:
            plan.raise_[rule] = match
    return plan


def _grew(entry: Mapping[str, Any], evidence: Mapping[str, Any], rule: AnomalyRule | None) -> bool:
    """An uncorroborated anomaly of an `events` rule about children whose evidence grew: judged again."""
    if rule is None or not _needs_corroboration(rule) or entry.get("rollback_ok") or not rule.rollback:
        return False
    return _int(evidence.get("occurrences"), 0) > _int(entry.get("judged_occurrences"), 0)


def _needs_corroboration(rule: AnomalyRule) -> bool:
    return rule.type == EVENTS and rule.involved in ("children", "any")


class _Judge:
    """Raises anomalies with their evidence and verdict (`rollback_ok`, `why_not`), reading Pods only here."""

    def __init__(self, by_name: Mapping[str, AnomalyRule], api: Any, now: datetime) -> None:
        self.by_name = by_name
        self.read = pod_reader(api) if api is not None else None
        self.now = now

    def verdict(self, row: Resource, rule_name: str, evidence: dict[str, Any],
                previous: Mapping[str, int] | None = None) -> tuple[bool, str, dict[str, Any]]:
        """(rollback_ok, why_not, evidence with the counted Events and the corroboration)."""
        rule = self.by_name.get(rule_name)
        if rule is None:
            return False, "the rule is not among the kind's rules", evidence
        if rule.type == EVENTS:
            evidence = {**evidence, "events": counted_events(rule, row.pk, self.now)}
        if not rule.rollback:
            return False, "the rule says rollback: false", evidence
        if not _needs_corroboration(rule):
            return True, "", evidence
        found = corroborate(evidence.get("events") or [], self.read, previous)
        evidence = {**evidence, "corroboration": found}
        if not found["corroborated"]:
            return False, f"not corroborated: {found['why']}", evidence
        return True, "", evidence

    def raise_locked(self, row: Resource, rule: str, match: Match,
                     judged: tuple[bool, str, dict[str, Any]] | None = None) -> bool:
        """Raise `rule` about the row's generation with its evidence and verdict (`judged`: already judged)."""
        message, evidence = match
        ok, why, evidence = judged or self.verdict(row, rule, {**evidence, "generation": row.generation})
        evidence = {**evidence, "rollback_ok": ok, "why_not": why}
        if anomaly_raise_locked(row, rule, message, self.now, evidence) is None:
            return False
        self._entry(row, rule, evidence)
        return True

    def again_locked(self, row: Resource, rule: str, match: Match, report: HealReport) -> None:
        """Judge an uncorroborated anomaly again (its evidence grew): raised anew, on record, when the children's
        state now corroborates it; else only what was judged is remembered (the occurrences, the restarts)."""
        entry = dict((row.active_anomalies or {}).get(rule) or {})
        previous = {str(k): _int(v, 0) or 0 for k, v in (entry.get("restarts") or {}).items()}
        judged = self.verdict(row, rule, {**match[1], "generation": row.generation}, previous)
        if not judged[0]:
            self._entry(row, rule, {**judged[2], "rollback_ok": False, "why_not": judged[1]})
            return
        if anomaly_clear_locked(row, rule, "judged again: the children's state now corroborates it", self.now):
            report.cleared += 1
        if self.raise_locked(row, rule, match, judged):
            report.detected += 1

    def _entry(self, row: Resource, rule: str, evidence: Mapping[str, Any]) -> None:
        active = dict(row.active_anomalies or {})
        corroboration = evidence.get("corroboration") or {}
        active[rule] = {**active.get(rule, {}), "generation": row.generation,
                        "rollback_ok": bool(evidence.get("rollback_ok")), "why_not": str(evidence.get("why_not") or ""),
                        "judged_occurrences": _int(evidence.get("occurrences"), 0),
                        "restarts": corroboration.get("restarts") or {}}
        row.active_anomalies = active


def _int(value: Any, default: int | None = None) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
