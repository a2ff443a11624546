"""Metric anomaly rules against a real Prometheus (Debian's /usr/bin/prometheus, one per module, scraping every
200 ms) that scrapes an exporter of this process (prometheus_client: a gauge, a histogram and a counter whose
values the tests set): three consecutive critical evaluations raise the anomaly (and roll a bad spec change back
where automatic rollback is on), two do not, a warning never does; a new generation starts the count again.
Without Prometheus (unreachable, no answer in time, no URL) or with a query it cannot parse, the rule is not
evaluated: recorded once per change of state, shown by the API and the Healing panel, never read as healthy,
never a rollback."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_api_client import PrometheusConnect
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from rest_framework.test import APIClient

from reconcilers.core.meta import AUTO_ROLLBACK
from reconcilers.engine.audit import chain_verify
from reconcilers.engine.healing import metric_rules, rollback
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.models import HealingAction, HealingRecord, Resource
from tests.opsconsole.api import factories
from tests.opsconsole.telemetry.conftest import PROMETHEUS, Prometheus, free_port
from tests.reconcilers.audit_support import observed, record
from tests.reconcilers.engine.test_healing import _revision

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason="needs /usr/bin/prometheus")]

REC = MemcachedReconciler()
GAUGE = "opsconsole_test_latency_seconds"
RULE = {"name": "latency", "type": "metrics", "query": f"max by (namespace, service) ({GAUGE})", "warning": 0.5,
        "critical": 1.0, "every_seconds": 0, "labels": {"namespace": "namespace", "name": "service"}}


class Exporter:
    """A /metrics endpoint of this process with the series the tests set, per (namespace, service)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Gauge(GAUGE, "a latency the test sets", ["namespace", "service"], registry=self.registry)
        self.duration = Histogram("http_request_duration_seconds", "request time", ["namespace", "service"],
                                  buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0), registry=self.registry)
        self.requests = Counter("http_requests", "answers", ["namespace", "service", "code"], registry=self.registry)
        self.port = free_port()
        self.server, self.thread = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Scraped:
    """The module's Prometheus and exporter, and a wait for a value to be scraped."""

    def __init__(self, prometheus: Prometheus, exporter: Exporter) -> None:
        self.prometheus, self.exporter = prometheus, exporter
        self.client = PrometheusConnect(prometheus.url)

    def value(self, query: str) -> float | None:
        result = self.client.custom_query(query)
        return float(result[0]["value"][1]) if result else None

    def wait(self, query: str, check: Any, timeout: float = 10.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.value(query)
            if value is not None and check(value):
                return value
            time.sleep(0.05)
        raise TimeoutError(f"{query} never passed the check (last {self.value(query)})")

    def set(self, service: str, value: float) -> None:
        """Set the latency gauge of `default/<service>` and wait until Prometheus has scraped it."""
        self.exporter.latency.labels("default", service).set(value)
        self.wait(f'{GAUGE}{{namespace="default",service="{service}"}}', lambda v: v == value)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[Scraped]:
    exporter = Exporter()
    prometheus = Prometheus(tmp_path_factory.mktemp("prometheus"), {"exporter": exporter.port}, interval="200ms")
    try:
        prometheus.wait_up(["exporter"])
        yield Scraped(prometheus, exporter)
    finally:
        prometheus.stop()
        exporter.stop()


@pytest.fixture
def prom(scraped, settings) -> Scraped:
    """This test with the Memcached kind's rules replaced by RULE (unless it sets others) and Prometheus's URL."""
    settings.PROMETHEUS_URL = scraped.prometheus.url
    settings.OPSCONSOLE_HEALING = {"Memcached": {"rules": [RULE]}}
    return scraped


def _evaluator(annotations: dict[str, Any] | None = None) -> Evaluator:
    return Evaluator(None, [REC], annotations=lambda _rec, _res: dict(annotations or {}), enqueue=lambda keys: None)


def _running(uid: str) -> Resource:
    record(observed(uid), "Running")
    return Resource.objects.get(uid=uid)


def _actions(resource: Resource) -> list[str]:
    return list(HealingRecord.objects.filter(resource=resource).order_by("seq").values_list("action", flat=True))


# -- matching --------------------------------------------------------------------------------------------------


def test_three_consecutive_critical_evaluations_raise_the_anomaly_with_the_samples_as_evidence(prom):
    resource = _running("mr1")
    evaluator = _evaluator()
    detected = []
    for value in (1.5, 1.6, 1.7):
        prom.set(resource.name, value)
        detected.append(evaluator.step().detected)
    assert detected == [0, 0, 1]
    resource.refresh_from_db()
    assert set(resource.active_anomalies) == {"latency"}
    entry = resource.active_anomalies["latency"]  # about the current generation, and it may roll back
    assert (entry["generation"], entry["rollback_ok"], entry["why_not"]) == (1, True, "")
    record_ = HealingRecord.objects.get(resource=resource, action=HealingAction.ANOMALY_DETECTED)
    assert record_.rule == "latency" and "3 consecutive critical evaluations (the last 1.7 > 1)" in record_.message
    detail = record_.detail
    assert [s["value"] for s in detail["samples"]] == [1.5, 1.6, 1.7]
    assert {s["severity"] for s in detail["samples"]} == {"critical"}
    assert all(s["at"] and s["labels"]["service"] == resource.name for s in detail["samples"])
    assert (detail["generation"], detail["rollback_ok"], detail["query"]) == (1, True, RULE["query"])
    prom.set(resource.name, 0.2)  # healthy again: the rule no longer matches
    assert evaluator.step().cleared == 1
    assert chain_verify().ok


def test_two_critical_evaluations_do_not_match_and_a_warning_never_does(prom):
    resource = _running("mr2")
    evaluator = _evaluator()
    for value in (1.5, 1.6, 0.2, 0.7, 0.8, 0.9, 0.95):  # two critical, then ok, then warnings only
        prom.set(resource.name, value)
        assert evaluator.step().detected == 0
    assert evaluator.metric_state.severity_of(resource.id, "latency") == "warning"
    resource.refresh_from_db()
    assert resource.active_anomalies == {}
    assert _actions(resource) == []  # evaluated all along: nothing to record


def test_a_new_generation_starts_the_count_from_zero(prom):
    resource = _running("mr3")
    evaluator = _evaluator()
    for value in (1.5, 1.6):
        prom.set(resource.name, value)
        evaluator.step()
    record(observed("mr3", generation=2), "Pending")  # a spec change: the anomaly would be about generation 2
    for value, expected in ((1.7, 0), (1.8, 0), (1.9, 1)):
        prom.set(resource.name, value)
        assert evaluator.step().detected == expected
    detail = HealingRecord.objects.get(resource=resource, action=HealingAction.ANOMALY_DETECTED).detail
    assert detail["generation"] == 2 and [s["value"] for s in detail["samples"]] == [1.7, 1.8, 1.9]


class FakeCluster:
    """The one object the rollback reads and writes (kube.get_object / kube.request_json), as an API server
    would answer: the PUT bumps the generation."""

    def __init__(self, resource: Resource, spec: dict[str, Any]) -> None:
        self.obj = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                    "metadata": {"name": resource.name, "namespace": resource.namespace, "uid": resource.uid,
                                 "generation": resource.generation, "resourceVersion": "7"}, "spec": spec}
        self.puts: list[dict[str, Any]] = []

    def get_object(self, api: Any, kind: Any, namespace: str | None, name: str, **_: Any) -> dict[str, Any]:
        return self.obj

    def request_json(self, api: Any, method: str, path: str, *, query: Any = None, body: Any = None,
                     **_: Any) -> dict[str, Any]:
        assert method == "PUT" and path.endswith(f"/namespaces/default/memcacheds/{self.obj['metadata']['name']}")
        self.puts.append({"query": query, "body": body})
        meta = {**body["metadata"], "generation": self.obj["metadata"]["generation"] + 1}
        self.obj = {**body, "metadata": meta}
        return self.obj


def test_the_anomaly_of_a_bad_spec_change_rolls_it_back_where_automatic_rollback_is_on(prom, monkeypatch):
    record(observed("mr4"), "Running")
    _revision("mr4", 1, {"size": 1, "image": "memcached:1.6"})
    record(observed("mr4", generation=2), "Degraded")  # the change's pods answer, slowly
    _revision("mr4", 2, {"size": 1, "image": "memcached:slow"})
    resource = Resource.objects.get(uid="mr4")
    cluster = FakeCluster(resource, {"size": 1, "image": "memcached:slow"})
    monkeypatch.setattr(rollback.kube, "get_object", cluster.get_object)
    monkeypatch.setattr(rollback.kube, "request_json", cluster.request_json)
    evaluator = _evaluator({AUTO_ROLLBACK: "true"})
    prom.set(resource.name, 0.7)
    assert evaluator.step().rollbacks == 0  # a warning: nothing to roll back
    rollbacks = []
    for value in (1.5, 1.6, 1.7):
        prom.set(resource.name, value)
        rollbacks.append(evaluator.step().rollbacks)
    assert rollbacks == [0, 0, 1]
    assert [put["body"]["spec"] for put in cluster.puts] == [{"size": 1, "image": "memcached:1.6"}]
    resource.refresh_from_db()
    assert resource.rollback["state"] == "in_progress" and resource.rollback["to_generation"] == 1
    assert _actions(resource)[:2] == [HealingAction.ANOMALY_DETECTED, HealingAction.ROLLBACK_STARTED]
    entry = resource.active_anomalies["latency"]
    assert (entry["generation"], entry["rollback_ok"], entry["why_not"]) == (2, True, "")
    started = HealingRecord.objects.get(resource=resource, action=HealingAction.ROLLBACK_STARTED)
    assert "generation 2 led to the anomaly latency" in started.reason


# -- not evaluated ---------------------------------------------------------------------------------------------


def _not_evaluated(resource: Resource) -> list[HealingRecord]:
    return list(HealingRecord.objects.filter(resource=resource, action=HealingAction.RULE_NOT_EVALUATED))


def test_prometheus_down_is_not_evaluated_recorded_once_shown_and_evaluated_again_when_it_is_back(
        prom, settings, builtin_kinds_only):
    resource = _running("mr5")
    evaluator = _evaluator()
    for value in (1.5, 1.6, 1.7):
        prom.set(resource.name, value)
        evaluator.step()
    assert set(Resource.objects.get(pk=resource.pk).active_anomalies) == {"latency"}
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    for _ in range(3):
        report = evaluator.step()
        assert report.cleared == 0 and report.rollbacks == 0
    assert time.monotonic() - started < 3  # connection refused: no retries, no back-off
    [down] = _not_evaluated(resource)
    assert down.rule == "latency" and "is unreachable" in down.reason and down.detail["cause"] == "prometheus"
    resource.refresh_from_db()
    assert set(resource.active_anomalies) == {"latency"}  # an outage does not clear an anomaly

    viewer = factories.user("mr5-viewer", "viewer")
    api = APIClient()
    api.force_login(viewer)
    body = api.get(f"/api/v1/resources/{resource.pk}/healing").json()
    assert [(n["rule"], n["cause"]) for n in body["not_evaluated"]] == [("latency", "prometheus")]
    assert "is unreachable" in body["not_evaluated"][0]["reason"]
    console = Client()
    console.force_login(viewer)
    page = console.get(f"/resources/{resource.pk}/").content.decode()
    assert 'id="healing-not-evaluated"' in page and "not evaluated is not healthy" in page
    assert "rule.not_evaluated" in page

    settings.PROMETHEUS_URL = prom.prometheus.url
    prom.set(resource.name, 0.2)
    evaluator.step()
    evaluator.step()
    assert _actions(resource)[-3:] == [HealingAction.RULE_NOT_EVALUATED, HealingAction.RULE_EVALUATED,
                                       HealingAction.ANOMALY_CLEARED]
    assert api.get(f"/api/v1/resources/{resource.pk}/healing").json()["not_evaluated"] == []
    assert chain_verify().ok


def test_a_fleet_records_each_change_once_spread_over_steps_and_a_restart_does_not_record_it_again(
        prom, settings, monkeypatch):
    fleet = [_running(f"mr6-{i}") for i in range(5)]
    settings.PROMETHEUS_URL = None  # no Prometheus configured at all
    monkeypatch.setattr(metric_rules, "MAX_RECORDS_PER_STEP", 2)
    evaluator = _evaluator()
    counts = []
    for _ in range(4):
        evaluator.step()
        counts.append(HealingRecord.objects.filter(resource__in=fleet,
                                                   action=HealingAction.RULE_NOT_EVALUATED).count())
    assert counts == [2, 4, 5, 5]
    assert {r.reason for r in HealingRecord.objects.filter(resource__in=fleet)} == {"PROMETHEUS_URL is not set"}
    _evaluator().step()  # a restarted controller reads the state on record: nothing recorded again
    assert HealingRecord.objects.filter(resource__in=fleet).count() == 5


def test_no_answer_in_time_is_not_evaluated(prom, settings):
    resource = _running("mr7")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{silent.getsockname()[1]}"
    settings.OPSCONSOLE_METRIC_RULES_TIMEOUT = 0.3
    try:
        started = time.monotonic()
        _evaluator().step()
        assert time.monotonic() - started < 2
    finally:
        silent.close()
    [late] = _not_evaluated(resource)
    assert "did not answer within 0.3s" in late.reason


def test_a_query_that_does_not_parse_is_a_rule_error_on_record_and_never_a_rollback(prom, settings, monkeypatch):
    record(observed("mr8"), "Running")
    _revision("mr8", 1, {"size": 1})
    record(observed("mr8", generation=2), "Degraded")
    _revision("mr8", 2, {"size": 2})
    resource = Resource.objects.get(uid="mr8")
    prom.set(resource.name, 5.0)
    settings.OPSCONSOLE_HEALING = {"Memcached": {"rules": [{**RULE, "consecutive": 1,
                                                           "query": f"max by (namespace, service) ({GAUGE}"}]}}
    monkeypatch.setattr(rollback.kube, "request_json", lambda *a, **k: pytest.fail("no rollback may be written"))
    evaluator = _evaluator({AUTO_ROLLBACK: "true"})
    for _ in range(3):
        report = evaluator.step()
        assert (report.detected, report.rollbacks, report.escalations) == (0, 0, [])
    [error] = _not_evaluated(resource)
    assert error.detail["cause"] == "query" and "Prometheus refused the query (400)" in error.reason
    assert "parse error" in error.reason
    resource.refresh_from_db()
    assert resource.active_anomalies == {} and resource.rollback is None


def test_an_object_without_a_series_is_not_evaluated_not_healthy(prom):
    resource = _running("mr9")  # the exporter has no series for it
    _evaluator().step()
    [missing] = _not_evaluated(resource)
    assert missing.detail["cause"] == "no_series"
    assert f'service="{resource.name}"' in missing.reason and 'namespace="default"' in missing.reason


# -- the rules a kind may switch on ----------------------------------------------------------------------------


def test_the_p99_latency_and_5xx_ratio_rules_of_a_kinds_service_on_real_series(prom, settings):
    from reconcilers.core.healing import error_ratio_rule, latency_p99_rule

    resource = _running("mr10")
    service = resource.name
    duration = prom.exporter.duration.labels("default", service)
    ok = prom.exporter.requests.labels("default", service, "200")
    failed = prom.exporter.requests.labels("default", service, "503")
    selector = f'{{namespace="default",service="{service}"}}'
    prom.wait(f"sum(http_requests_total{selector})", lambda v: v == 0)  # scraped at zero first
    for _ in range(7):
        duration.observe(2.0)
        ok.inc()
    for _ in range(3):
        duration.observe(3.0)
        failed.inc()
    prom.wait(f"sum(http_requests_total{selector})", lambda v: v == 10)
    time.sleep(0.5)  # a few more scrapes in the window
    p99 = latency_p99_rule(warning=0.5, critical=1.0, window_seconds=5, consecutive=1, every_seconds=0)
    ratio = error_ratio_rule(window_seconds=5, consecutive=1, every_seconds=0)
    settings.OPSCONSOLE_HEALING = {"Memcached": {"rules": [p99, ratio]}}
    evaluator = _evaluator()
    assert evaluator.step().detected == 2
    resource.refresh_from_db()
    assert set(resource.active_anomalies) == {"latency_p99", "http_5xx"}
    values = {r.rule: r.detail["value"] for r in HealingRecord.objects.filter(
        resource=resource, action=HealingAction.ANOMALY_DETECTED)}
    assert 1.0 < values["latency_p99"] <= 5.0  # the 2.5–5 s bucket
    assert values["http_5xx"] == pytest.approx(0.3, abs=0.05)
