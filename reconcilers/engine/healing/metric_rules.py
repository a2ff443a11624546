"""Metric anomaly rules (`type: metrics`): a PromQL query per rule, evaluated through Prometheus, and the record
of whether it could be evaluated.

One instant query per rule and kind (`PrometheusConnect.custom_query` on `settings.PROMETHEUS_URL`, with a
timeout of `OPSCONSOLE_METRIC_RULES_TIMEOUT` seconds, default 3, and no retries), at most once every
`rule.every_seconds`; between two evaluations the step keeps the last verdict. The query returns one series per
object; the rule's `labels` say which result labels hold the object's namespace and name. Nothing of an object
is written into the query.

Each evaluation of one object gives a value and its severity (critical, warning, ok). The rule matches once the
last `consecutive` evaluations of the object's current generation were all critical (a new generation starts
from zero: the anomaly is about the generation that is there now). A warning never matches. The counts live in
the evaluator's `MetricState`, in memory only: a controller restart starts them from zero.

**Not evaluated is never healthy.** No URL, Prometheus unreachable, no answer in time, an error answer, a query
Prometheus refuses (it does not parse), an answer that is not a vector, no series for the object, more than one
series for it, a NaN: the object's rule is not evaluated. Its count starts again from zero, an anomaly already
active stays active (it is not cleared by an outage), nothing is rolled back. The object's chain records the
change of state, not every step: `rule.not_evaluated` (the reason, and `detail.cause`) when it stops being
evaluated, `rule.evaluated` when it is again. So a Prometheus outage costs two records per object and metric
rule, one when it starts and one when it ends, written at most `MAX_RECORDS_PER_STEP` per rule and step (the rest
in the next steps). The state on record is read back once per process, so a restart does not record it again.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from reconcilers.core.healing import AnomalyRule
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.models import HealingAction, HealingRecord, Resource

log = logging.getLogger(__name__)

#: how many `rule.not_evaluated` / `rule.evaluated` records one rule writes per step at most (a fleet's outage is
#: recorded over several steps rather than in one long one)
MAX_RECORDS_PER_STEP = 200
#: the causes a `rule.not_evaluated` record names in its detail
UNAVAILABLE, QUERY, NO_SERIES, AMBIGUOUS, NO_VALUE = "prometheus", "query", "no_series", "ambiguous", "no_value"

Match = tuple[str, dict[str, Any]]


class NotEvaluated(Exception):
    """The rule could not be evaluated; `cause` is one of the causes above, the message says why."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause, self.message = cause, message[:1000]


@dataclass(frozen=True)
class Sample:
    """One evaluation of one object: the value, when Prometheus evaluated it (unix seconds), its severity."""

    at: float
    value: float
    severity: str

    def shown(self) -> dict[str, Any]:
        """The sample as evidence."""
        return {"at": datetime.fromtimestamp(self.at, UTC).isoformat(), "value": self.value,
                "severity": self.severity}


@dataclass
class MetricState:
    """What the evaluator keeps across steps about metric rules (in memory: a restart starts from zero)."""

    #: (resource id, rule) -> (the generation they are about, the last evaluations, newest last)
    samples: dict[tuple[int, str], tuple[int, deque[Sample]]] = field(default_factory=dict)
    #: (kind, rule) -> when it was last evaluated, and what matched then
    last_run: dict[tuple[str, str], datetime] = field(default_factory=dict)
    last_matches: dict[tuple[str, str], dict[int, Match]] = field(default_factory=dict)
    #: (resource id, rule) -> as on record: True evaluated, False not evaluated (absent: nothing on record)
    on_record: dict[tuple[int, str], bool] = field(default_factory=dict)
    loaded: set[tuple[str, str]] = field(default_factory=set)
    clients: dict[tuple[str, float], Any] = field(default_factory=dict)

    def severity_of(self, resource_id: int, rule: str) -> str | None:
        """The severity of the object's last evaluation (None: not evaluated) — a warning shows here only."""
        entry = self.samples.get((resource_id, rule))
        return entry[1][-1].severity if entry and entry[1] else None


def prometheus_url() -> str | None:
    """settings.PROMETHEUS_URL (None when unset)."""
    return getattr(settings, "PROMETHEUS_URL", None) or None


def query_timeout() -> float:
    """settings.OPSCONSOLE_METRIC_RULES_TIMEOUT: seconds one rule's query may take (default 3)."""
    return float(getattr(settings, "OPSCONSOLE_METRIC_RULES_TIMEOUT", 3))


def _client(state: MetricState, url: str, timeout: float) -> Any:
    from prometheus_api_client import PrometheusConnect
    from urllib3.util.retry import Retry

    key = (url, timeout)
    if key not in state.clients:
        # no retries: a step waits at most one timeout per rule, and the next evaluation is the retry (read=False:
        # a read timeout is raised as one, not as a connection error)
        state.clients[key] = PrometheusConnect(url=url, retry=Retry(total=0, read=False, status_forcelist=()),
                                               timeout=timeout)
    return state.clients[key]


def run_query(rule: AnomalyRule, state: MetricState) -> list[dict[str, Any]]:
    """The rule's query evaluated now: its result vector. Raises NotEvaluated."""
    import requests
    from prometheus_api_client.exceptions import PrometheusApiClientException

    url = prometheus_url()
    if not url:
        raise NotEvaluated(UNAVAILABLE, "PROMETHEUS_URL is not set")
    timeout = query_timeout()
    params = {"timeout": f"{max(1, round(timeout * 1000))}ms"}
    try:
        result = _client(state, url, timeout).custom_query(rule.query, params=params)
    except requests.Timeout:
        raise NotEvaluated(UNAVAILABLE, f"Prometheus at {url} did not answer within {timeout:g}s") from None
    except requests.RequestException as exc:
        raise NotEvaluated(UNAVAILABLE, f"Prometheus at {url} is unreachable: {_why(exc)}") from None
    except PrometheusApiClientException as exc:
        status, error = _answer(str(exc))
        if status in (400, 422):
            raise NotEvaluated(QUERY, f"Prometheus refused the query ({status}): {error}") from None
        raise NotEvaluated(UNAVAILABLE, f"Prometheus answered {status or 'an error'}: {error}") from None
    except (ValueError, KeyError, TypeError) as exc:  # not JSON, or not a query answer
        raise NotEvaluated(UNAVAILABLE, f"Prometheus's answer could not be read: {exc}") from None
    except Exception as exc:  # whatever else went wrong: not evaluated, never healthy
        raise NotEvaluated(UNAVAILABLE, f"Prometheus at {url} could not be asked: {type(exc).__name__}: "
                                        f"{exc}") from None
    if not isinstance(result, list) or any(not isinstance(row, dict) for row in result):
        raise NotEvaluated(QUERY, "the query must return an instant vector, one series per object")
    return result


def _why(exc: Exception) -> str:
    """The gist of a connection error ("[Errno 111] Connection refused"), else its type."""
    found = re.search(r"\[Errno -?\d+\] [^'\")\]]+", str(exc))
    return found.group(0).strip() if found else type(exc).__name__


def _answer(text: str) -> tuple[int | None, str]:
    """The status and Prometheus's error message out of a PrometheusApiClientException's text."""
    found = re.search(r"HTTP Status Code (\d+)", text)
    status = int(found.group(1)) if found else None
    body = re.search(r"\((b'.*'|b\".*\")\)\s*$", text, re.S)
    error = text
    if body:
        try:
            content = ast.literal_eval(body.group(1))
            error = str(json.loads(content).get("error") or content.decode(errors="replace"))
        except (ValueError, SyntaxError, AttributeError, UnicodeDecodeError):
            error = body.group(1)
    return status, error[:500]


def metric_matches(rec: Reconciler, rule: AnomalyRule, live: Any, now: datetime, state: MetricState | None
                   ) -> dict[int, Match]:
    """{resource id: (message, evidence)} for the objects the metric rule matches now (see the module docstring).
    Never raises: an unexpected error keeps the last verdict and is logged. `state` None: a fresh one (every
    call starts from zero)."""
    state = state if state is not None else MetricState()
    key = (f"{rec.resource.group}/{rec.resource.plural}", rule.name)
    last = state.last_run.get(key)
    if last is not None and 0 <= (now - last).total_seconds() < rule.every_seconds:
        return dict(state.last_matches.get(key, {}))
    try:
        matches = _evaluate(key, rule, live, now, state)
    except Exception:
        log.warning("healing: the metric rule %s of %s could not be evaluated", rule.name, key[0], exc_info=True)
        return dict(state.last_matches.get(key, {}))
    state.last_run[key] = now
    state.last_matches[key] = matches
    return dict(matches)


def _evaluate(key: tuple[str, str], rule: AnomalyRule, live: Any, now: datetime, state: MetricState
              ) -> dict[int, Match]:
    rows = list(live.values_list("id", "namespace", "name", "generation", "active_anomalies"))
    _load(key, rule, live, state)
    try:
        series: dict[tuple[str, ...], list[dict[str, Any]]] | None = _by_object(rule, run_query(rule, state))
        failure: NotEvaluated | None = None
    except NotEvaluated as exc:
        series, failure = None, exc
    bound = rule.label_map
    matches: dict[int, Match] = {}
    changes: list[tuple[int, bool, str, dict[str, Any]]] = []
    ids = set()
    for rid, namespace, name, generation, active in rows:
        ids.add(rid)
        object_key = tuple(namespace if f == "namespace" else name for f in sorted(bound))
        problem = failure
        found = [] if series is None else series.get(object_key, [])
        if problem is None and not found:
            problem = NotEvaluated(NO_SERIES, f"the query returned no series for {_labels_of(bound, object_key)}")
        elif problem is None and len(found) > 1:
            problem = NotEvaluated(AMBIGUOUS, f"the query returned {len(found)} series for "
                                              f"{_labels_of(bound, object_key)}; it must return one per object")
        sample = None if problem is not None else _sample(rule, found[0])
        if problem is None and sample is None:
            problem = NotEvaluated(NO_VALUE, f"no value (NaN) for {_labels_of(bound, object_key)}")
        was = state.on_record.get((rid, rule.name))
        if problem is not None:
            state.samples.pop((rid, rule.name), None)
            anomaly = (active or {}).get(rule.name)
            if anomaly is not None:  # an outage does not clear an anomaly: not evaluated is not healthy
                matches[rid] = (str(anomaly.get("message") or ""), {"not_evaluated": problem.message})
            if was is not False:
                changes.append((rid, False, problem.message, {"cause": problem.cause, "query": rule.query}))
            continue
        assert sample is not None
        seen_generation, history = state.samples.get((rid, rule.name), (generation, deque()))
        if seen_generation != generation or history.maxlen != rule.consecutive:
            history = deque(history if seen_generation == generation else (), maxlen=rule.consecutive)
        history.append(sample)
        state.samples[(rid, rule.name)] = (generation, history)
        if len(history) == rule.consecutive and all(s.severity == "critical" for s in history):
            matches[rid] = _match(rule, generation, history, found[0].get("metric") or {})
        if was is False:
            changes.append((rid, True, "the rule is evaluated again", {"value": sample.value,
                                                                        "severity": sample.severity}))
        elif was is None:
            state.on_record[(rid, rule.name)] = True  # evaluated from the start: nothing to record
    for gone in [k for k in state.samples if k[1] == rule.name and k[0] not in ids]:
        state.samples.pop(gone, None)
    _record(rule, changes, now, state)
    return matches


def _by_object(rule: AnomalyRule, result: list[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    bound = rule.label_map
    out: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in result:
        metric = row.get("metric") or {}
        out.setdefault(tuple(str(metric.get(bound[f], "")) for f in sorted(bound)), []).append(row)
    return out


def _labels_of(bound: dict[str, str], object_key: tuple[str, ...]) -> str:
    return ",".join(f'{bound[f]}="{v}"' for f, v in zip(sorted(bound), object_key, strict=True))


def _sample(rule: AnomalyRule, row: dict[str, Any]) -> Sample | None:
    try:
        at, text = row["value"]
        value, when = float(text), float(at)
    except (KeyError, TypeError, ValueError):
        return None
    if math.isnan(value):
        return None
    return Sample(when, value, rule.severity(value))


def _match(rule: AnomalyRule, generation: int, history: Iterable[Sample], metric: dict[str, Any]) -> Match:
    """A match's message and evidence: the samples (value, time, severity), the series, the thresholds, and the
    generation it is about; it matched on critical, so it may roll back exactly when the rule allows it."""
    samples = list(history)
    sign = ">" if rule.direction == "above" else "<"
    message = (f"{len(samples)} consecutive critical evaluations (the last {samples[-1].value:g} {sign} "
               f"{rule.critical:g})")
    evidence = {"query": rule.query, "value": samples[-1].value, "severity": "critical", "generation": generation,
                "samples": [{**s.shown(), "labels": dict(metric)} for s in samples], "direction": rule.direction,
                "warning": rule.warning, "critical": rule.critical, "consecutive": rule.consecutive,
                "rollback_ok": bool(rule.rollback),
                "why_not": "" if rule.rollback else f"rule {rule.name} does not roll back"}
    return message, evidence


def _load(key: tuple[str, str], rule: AnomalyRule, live: Any, state: MetricState) -> None:
    """The evaluation state on record for the kind's objects (once per process and rule)."""
    if key in state.loaded:
        return
    rows = (HealingRecord.objects.filter(resource__in=live.values("id"), rule=rule.name,
                                         action__in=[HealingAction.RULE_NOT_EVALUATED, HealingAction.RULE_EVALUATED])
            .order_by("resource_id", "seq").values_list("resource_id", "action"))
    for rid, action in rows.iterator():
        state.on_record[(rid, rule.name)] = action == HealingAction.RULE_EVALUATED
    state.loaded.add(key)


def _record(rule: AnomalyRule, changes: list[tuple[int, bool, str, dict[str, Any]]], now: datetime,
            state: MetricState) -> None:
    """Append the changes of state to the objects' chains (at most MAX_RECORDS_PER_STEP; the rest next time)."""
    for rid, evaluated, reason, detail in changes[:MAX_RECORDS_PER_STEP]:
        with transaction.atomic():
            row = Resource.objects.select_for_update().filter(pk=rid, deleted=False).first()
            if row is None:
                continue
            if evaluated:
                healing_append(row, HealingAction.RULE_EVALUATED, actor="controller", rule=rule.name, reason=reason,
                               message=f"rule {rule.name} is evaluated again", detail=detail, at=now)
            else:
                healing_append(row, HealingAction.RULE_NOT_EVALUATED, actor="controller", rule=rule.name,
                               reason=reason, message=f"rule {rule.name} is not evaluated: it does not say the "
                                                      "object is healthy", detail=detail, at=now)
            row.save(update_fields=fields_to_save())
        state.on_record[(rid, rule.name)] = evaluated


def not_evaluated_on_record(resource_id: int) -> list[dict[str, Any]]:
    """The resource's rules whose latest evaluation record is `rule.not_evaluated`: [{rule, since, reason, cause,
    record}], sorted by rule (what the Healing panel and `GET .../healing` show)."""
    latest: dict[str, HealingRecord] = {}
    rows = HealingRecord.objects.filter(resource_id=resource_id, action__in=[
        HealingAction.RULE_NOT_EVALUATED, HealingAction.RULE_EVALUATED]).order_by("seq")
    for row in rows.only("rule", "action", "reason", "detail", "created_at", "seq"):
        latest[row.rule] = row
    return [{"rule": rule, "since": row.created_at.isoformat(), "reason": row.reason,
             "cause": str((row.detail or {}).get("cause") or ""), "record": row.seq}
            for rule, row in sorted(latest.items()) if row.action == HealingAction.RULE_NOT_EVALUATED]
