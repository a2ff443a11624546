"""Metric anomaly rules as a kind or the settings declare them (no Prometheus): the fields a `metrics` rule needs
and the errors naming the one at fault, the verdict on a value, `describe()`, and the P99 latency and 5xx ratio
rules built for a kind's Service, their selector values escaped."""

from __future__ import annotations

import json

import pytest

from reconcilers.core.healing import (
    METRICS,
    AnomalyRule,
    Healing,
    RuleError,
    error_ratio_rule,
    latency_p99_rule,
    promql_string,
)

BASE = {"name": "p99", "type": "metrics", "query": "max by (namespace, service) (latency)", "warning": 0.5,
        "critical": 1.0, "labels": {"namespace": "namespace", "name": "service"}}


def test_a_metric_rule_from_settings_json():
    rule = AnomalyRule.from_dict(json.loads(json.dumps(BASE)))
    assert rule.type == METRICS and rule.consecutive == 3 and rule.direction == "above"
    assert rule.label_map == {"namespace": "namespace", "name": "service"}
    assert hash(rule)  # still a frozen, hashable value
    assert [rule.severity(v) for v in (0.2, 0.5, 0.7, 1.0, 1.5)] == ["ok", "ok", "warning", "warning", "critical"]
    below = AnomalyRule.from_dict({**BASE, "direction": "below", "warning": 10, "critical": 5})
    assert [below.severity(v) for v in (20, 7, 4)] == ["ok", "warning", "critical"]
    assert rule.describe() == ("3 consecutive evaluations of max by (namespace, service) (latency) > 1 (critical; "
                               "warning > 0.5), one at most every 30s")


@pytest.mark.parametrize(("change", "message"), [
    ({"query": "  "}, "p99.query: a metrics rule needs a PromQL query"),
    ({"warning": None}, "p99.warning: a metrics rule needs a finite number"),
    ({"critical": "high"}, "p99.critical: a metrics rule needs a finite number"),
    ({"critical": float("nan")}, "p99.critical: a metrics rule needs a finite number"),
    ({"critical": 0.2}, "p99.warning/critical: with direction 'above' critical (0.2) must not be below warning"),
    ({"direction": "below"}, "p99.warning/critical: with direction 'below' critical (1) must not be above warning"),
    ({"direction": "sideways"}, "p99.direction: must be one of above, below"),
    ({"consecutive": 0}, "p99.consecutive: must be an integer >= 1"),
    ({"consecutive": 1.5}, "p99.consecutive: must be an integer >= 1"),
    ({"every_seconds": -1}, "p99.every_seconds: must be a number >= 0"),
    ({"labels": {"uid": "uid", "name": "service"}}, "p99.labels.uid: unknown (known: namespace, name)"),
    ({"labels": {"namespace": "namespace"}}, "p99.labels.name: required"),
    ({"labels": {"name": 'service"}'}}, "p99.labels.name: 'service\"}' is not a Prometheus label name"),
    ({"labels": "service"}, "p99.labels: a mapping of the object's field to a result label"),
    ({"treshold": 3}, "p99.treshold: unknown field"),
])
def test_a_metric_rule_with_a_wrong_field_is_refused_naming_it(change, message):
    with pytest.raises(RuleError) as refused:
        AnomalyRule.from_dict({**BASE, **change})
    assert str(refused.value).startswith(message), str(refused.value)


def test_the_other_types_are_unchanged_by_the_metric_fields():
    events = AnomalyRule("oom", "events", reasons=("OOMKilling",), threshold=2, window_seconds=600)
    assert events.describe() == ">= 2 Warning events (OOMKilling) about the object or its children in 600s"
    with pytest.raises(RuleError, match="oom.window_seconds/threshold"):
        AnomalyRule("oom", "events", reasons=("OOMKilling",), threshold=0)


def test_the_p99_and_5xx_rules_of_a_kinds_service():
    p99 = latency_p99_rule(warning=0.25, critical=0.5, window_seconds=120, selector={"job": "memcached"})
    assert p99.query == ('histogram_quantile(0.99, sum by (namespace, service, le) '
                         '(rate(http_request_duration_seconds_bucket{job="memcached"}[120s])))')
    assert p99.label_map == {"namespace": "namespace", "name": "service"} and p99.rollback
    ratio = error_ratio_rule()
    assert ratio.query == ('sum by (namespace, service) (rate(http_requests_total{code=~"5.."}[300s])) / '
                           'sum by (namespace, service) (rate(http_requests_total[300s]))')
    assert (ratio.warning, ratio.critical, ratio.consecutive) == (0.01, 0.05, 3)
    healing = Healing(rules=(p99, ratio))  # off by default: a kind lists them to switch them on
    assert [r.name for r in healing.rules or ()] == ["latency_p99", "http_5xx"]


def test_selector_values_are_escaped_and_label_names_checked():
    assert promql_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    rule = error_ratio_rule(selector={"job": 'x"} or vector(1) #'})
    assert '{job="x\\"} or vector(1) #",code=~"5.."}' in rule.query
    with pytest.raises(RuleError, match="selector.bad-label"):
        latency_p99_rule(selector={"bad-label": "x"})
    with pytest.raises(RuleError, match="p99.labels"):
        latency_p99_rule("p99", service_label="svc name")
    with pytest.raises(RuleError, match="window_seconds"):
        error_ratio_rule(window_seconds=0)
