"""What each active anomaly of a resource is about, as the Healing panel and `GET .../healing` show it.

`anomalies_shown` joins a resource's active anomalies (`Resource.active_anomalies`) with the `anomaly.detected`
record that raised each one, and answers, per anomaly:
- the generation it is about (`generation`; None when neither the active entry nor the record says, as on rows
  recorded before anomalies carried it; `recorded_at_generation` is then the resource's generation when it was
  recorded, which is not the same claim);
- whether it may trigger an automatic rollback (`rollback_ok`: True, False, or None when not on record) and why
  not (`why_not`);
- its evidence (`evidence`): what the rule counted (`occurrences`, `transitions`, `threshold`, `window_seconds`…),
  the counted Events (reason, involved object, occurrences, first and last time, the generation each is about)
  and metric samples when the rule compared metrics.

Every field is read as stored, so a row written before a field existed shows that field as unknown, never as a
made-up value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from reconcilers.models import HealingAction, HealingRecord, Resource

#: evidence entries that are shown elsewhere (the events and samples) or are not evidence at all
_NOT_FIGURES = frozenset({"events", "samples", "generation", "rollback_ok", "why_not", "metric", "query"})


def anomalies_shown(resource: Resource) -> list[dict[str, Any]]:
    """The resource's active anomalies, sorted by rule, each with its generation, rollback verdict and evidence."""
    active: dict[str, Any] = dict(resource.active_anomalies or {})
    if not active:
        return []
    records = _detected_records(resource, active)
    return [anomaly_shown(rule, info if isinstance(info, Mapping) else {}, records.get(rule))
            for rule, info in sorted(active.items())]


def _detected_records(resource: Resource, active: Mapping[str, Any]) -> dict[str, HealingRecord]:
    """{rule: the anomaly.detected record that raised it}: the record the active entry names (`record`, its seq),
    else the newest one of that rule."""
    by_seq: dict[int, str] = {}
    for rule, info in active.items():
        seq = info.get("record") if isinstance(info, Mapping) else None
        if isinstance(seq, int):
            by_seq[seq] = rule
    found: dict[str, HealingRecord] = {}
    rows = HealingRecord.objects.filter(resource=resource, action=HealingAction.ANOMALY_DETECTED)
    if by_seq:
        for row in rows.filter(seq__in=list(by_seq)):
            if row.rule == by_seq[row.seq]:
                found[row.rule] = row
    missing = [rule for rule in active if rule not in found]
    if missing:
        for row in rows.filter(rule__in=missing).order_by("-seq")[:100]:
            found.setdefault(row.rule, row)
    return found


def anomaly_shown(rule: str, info: Mapping[str, Any], record: HealingRecord | None) -> dict[str, Any]:
    """One anomaly: its active entry (`since`, `message`, …, passed through) with `generation`, `rollback_ok`,
    `why_not`, `evidence` and the record's seq, time and generation added."""
    detail: Mapping[str, Any] = record.detail if record is not None and isinstance(record.detail, Mapping) else {}
    generation = _first(info.get("generation"), detail.get("generation"))
    rollback_ok = _first(info.get("rollback_ok"), detail.get("rollback_ok"))
    why_not = _first(info.get("why_not"), detail.get("why_not"))
    return {
        **info,
        "rule": rule,
        "generation": generation if isinstance(generation, int) else None,
        "rollback_ok": rollback_ok if isinstance(rollback_ok, bool) else None,
        "why_not": str(why_not) if why_not else "",
        "record": record.seq if record is not None else info.get("record"),
        "recorded_at": record.created_at.isoformat() if record is not None else None,
        "recorded_at_generation": record.generation if record is not None else None,
        "evidence": evidence_shown(detail),
    }


def evidence_shown(detail: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence of an anomaly.detected record's detail: the figures the rule counted (`figures`, e.g.
    occurrences and the window), the counted Events (`events`) and metric samples (`samples`, `metric`)."""
    figures = {k: v for k, v in detail.items() if k not in _NOT_FIGURES and isinstance(v, (int, float, str, bool))
               and v is not None}
    metric = detail.get("metric") or detail.get("query") or ""
    return {
        "figures": figures,
        "events": [event_shown(e) for e in _dicts(detail.get("events"))],
        "samples": [s for s in (sample_shown(item) for item in _list(detail.get("samples"))) if s is not None],
        "metric": metric if isinstance(metric, str) else str(metric),
    }


def event_shown(event: Mapping[str, Any]) -> dict[str, Any]:
    """One counted Event: reason, type, the involved object (`Kind/name`), how many occurrences were counted (the
    archive's bounded `occurrences`; else the Event's own `count`, marked by `occurrences_is_count`), its times and
    the generation it is about when on record."""
    kind = str(event.get("involved_kind") or "")
    name = str(event.get("involved_name") or "")
    involved = event.get("involved") or (f"{kind}/{name}" if kind and name else kind or name)
    occurrences = event.get("occurrences")
    return {
        "reason": str(event.get("reason") or ""),
        "type": str(event.get("type") or ""),
        "involved": str(involved or ""),
        "occurrences": occurrences if isinstance(occurrences, int) else event.get("count"),
        "occurrences_is_count": not isinstance(occurrences, int) and event.get("count") is not None,
        "first_timestamp": event.get("first_timestamp") or event.get("first_seen"),
        "last_timestamp": event.get("last_timestamp") or event.get("last_seen"),
        "generation": event.get("generation") if isinstance(event.get("generation"), int) else None,
        "message": str(event.get("message") or ""),
    }


def sample_shown(item: Any) -> dict[str, Any] | None:
    """One metric sample as `{at, value, …}` from `{at|time|timestamp: …, value: …}` or a pair `[at, value]`."""
    if isinstance(item, Mapping):
        at = _first(item.get("at"), item.get("time"), item.get("timestamp"), item.get("t"))
        value = _first(item.get("value"), item.get("v"))
        labels = item.get("labels") if isinstance(item.get("labels"), Mapping) else None
        return {"at": _when(at), "value": value, "labels": labels} if value is not None or at is not None else None
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return {"at": _when(item[0]), "value": item[1], "labels": None}
    return None


def _when(at: Any) -> Any:
    """A sample's time as RFC 3339 when it is a Unix time (as Prometheus gives it), else as stored."""
    if isinstance(at, (int, float)) and not isinstance(at, bool):
        try:
            return datetime.fromtimestamp(at, UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            return str(at)
    return at


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _dicts(value: Any) -> Iterable[Mapping[str, Any]]:
    return [item for item in _list(value) if isinstance(item, Mapping)]
