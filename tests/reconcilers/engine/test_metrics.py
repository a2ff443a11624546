"""The metric definitions and the telemetry plumbing in one process: controller-runtime names and buckets,
every label pair at 0, the scrape-time resources collector, rest_client counting and API-call spans only
inside a trace, the bounded span store, and the deploy configs (promtool, the dashboard's metric names)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from opsconsole.telemetry.spanstore import DatabaseSpanProcessor
from reconcilers.engine import metrics, resources_gauge
from tests.reconcilers.testkinds import MACHINE

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"


def value(metric: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


def test_buckets_are_controller_runtimes_and_exact():
    assert metrics.RECONCILE_TIME_BUCKETS[0] == 0.005 and metrics.RECONCILE_TIME_BUCKETS[-1] == 60
    assert len(metrics.RECONCILE_TIME_BUCKETS) == 40
    assert metrics.WORKQUEUE_BUCKETS == tuple(float(f"1e{i}") for i in range(-8, 4))
    text = generate_latest(REGISTRY).decode()
    assert 'le="1.0000000000000002e-05"' not in text


def test_label_pairs_start_at_zero_for_every_result_transition_and_phase():
    metrics.label_pairs_init("labelpairs", "LabelPairs", MACHINE.states, metrics.machine_transitions(MACHINE),
                             metrics.FAILURE_REASONS)
    for result in metrics.RESULTS:
        assert value("controller_runtime_reconcile_total", controller="labelpairs", result=result) == 0
    assert value("workqueue_adds_total", name="labelpairs", controller="labelpairs") == 0
    assert value("opsconsole_transitions_total", kind="LabelPairs", **{"from": "", "to": "Pending"}) == 0
    assert value("opsconsole_transitions_total", kind="LabelPairs", **{"from": "Terminating", "to": "Deleted"}) == 0
    assert value("opsconsole_transitions_total", kind="LabelPairs", **{"from": "Deleted", "to": "Pending"}) is None
    assert value("opsconsole_time_in_phase_seconds_count", kind="LabelPairs", phase="Running") == 0
    assert value("operator_reconcile_failures_total", controller="labelpairs", reason="PermanentError") == 0


def test_failure_reasons_are_a_bounded_set():
    assert metrics.failure_reason("TemporaryError") == "TemporaryError"
    assert metrics.failure_reason("ApiException") == "ApiError"
    assert metrics.failure_reason("SomeUserDefinedError42") == "Exception"


@pytest.mark.django_db
def test_the_resources_collector_counts_rows_and_reports_every_declared_state(settings):
    from django.utils import timezone

    from reconcilers.engine import registry
    from reconcilers.models import Resource

    settings.OPSCONSOLE_RECONCILERS = ["tests.reconcilers.testkinds.GadgetReconciler"]
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    registry.reset()
    try:
        for i, phase in enumerate(["Running", "Running", "Pending"]):
            Resource.objects.create(uid=f"u{i}", key=f"k{i}", group="test.opsconsole.io", version="v1",
                                    plural="gadgets", kind="Gadget", namespace="n", name=f"g{i}", phase=phase,
                                    phase_since=timezone.now() - timezone.timedelta(seconds=100))
        Resource.objects.create(uid="gone", key="kg", group="test.opsconsole.io", version="v1", plural="gadgets",
                                kind="Gadget", namespace="n", name="gone", phase="Running", deleted=True)
        registry_ = CollectorRegistry()
        registry_.register(resources_gauge.ResourcesCollector())
        get = registry_.get_sample_value
        assert get("opsconsole_resources", {"kind": "Gadget", "phase": "Running"}) == 2
        assert get("opsconsole_resources", {"kind": "Gadget", "phase": "Pending"}) == 1
        assert get("opsconsole_resources", {"kind": "Gadget", "phase": "Deleted"}) == 0
        assert get("opsconsole_resources_oldest_in_phase_seconds", {"kind": "Gadget", "phase": "Pending"}) >= 100
        assert get("opsconsole_resources_oldest_in_phase_seconds", {"kind": "Gadget", "phase": "Failed"}) == 0
    finally:
        registry.reset()


@pytest.fixture
def in_memory_tracing():
    """A real SDK provider with an in-memory exporter, made current for the test."""
    from opentelemetry import trace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    yield provider, exporter
    trace._TRACER_PROVIDER = previous


class FakeResponse:
    status = 200
    data = b'{"metadata": {"name": "x"}}'


class FakeApi:
    """What kube_client._send uses of an ApiClient, answering every request with FakeResponse."""

    default_headers: dict = {}
    cookie = None

    class configuration:  # noqa: N801 - the attribute the client has
        host = "https://127.0.0.1:6443"

    class rest_client:  # noqa: N801
        class pool_manager:  # noqa: N801
            @staticmethod
            def request(*args, **kwargs):
                return FakeResponse()

    def update_params_for_auth(self, headers, queries, auth_settings):
        headers["Authorization"] = "Bearer t"


def test_api_calls_are_counted_always_and_spanned_only_inside_a_trace(in_memory_tracing):
    from reconcilers.engine import kube

    provider, exporter = in_memory_tracing
    labels = {"code": "200", "method": "GET", "host": "127.0.0.1:6443"}
    before = value("rest_client_requests_total", **labels) or 0
    kube.request_json(FakeApi(), "GET", "/api/v1/namespaces/a/configmaps/x")
    assert exporter.get_finished_spans() == ()  # no trace around it: no span (idle loops leave nothing)
    with provider.get_tracer("t").start_as_current_span("reconcile Thing"):
        kube.request_json(FakeApi(), "GET", "/api/v1/namespaces/a/configmaps/x")
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["GET configmaps", "reconcile Thing"]
    assert value("rest_client_requests_total", **labels) == before + 2


@pytest.mark.django_db(transaction=True)
def test_the_span_store_is_bounded_counts_drops_and_writes_batches(in_memory_tracing):
    from reconcilers.models import Span

    store = DatabaseSpanProcessor(max_queue=3, interval=60)
    provider, _ = in_memory_tracing
    provider.add_span_processor(store)
    dropped = value("opsconsole_spans_dropped_total") or 0
    tracer = provider.get_tracer("t")
    for i in range(5):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    assert value("opsconsole_spans_dropped_total") == dropped + 2  # the queue held three; never blocked
    assert store.force_flush(5000)
    assert sorted(Span.objects.values_list("name", flat=True)) == ["s0", "s1", "s2"]
    store.shutdown()
    assert not store._thread.is_alive()  # shutdown does not hang


@pytest.mark.django_db
def test_spans_insert_stores_every_field_and_skips_spans_already_stored():
    from datetime import UTC, datetime

    from opsconsole.telemetry.spanstore import spans_insert
    from reconcilers.models import Span

    def row(span_id: str, name: str) -> dict:
        at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
        return {"trace_id": "ab" * 16, "span_id": span_id, "parent_span_id": "", "name": name, "service": "worker",
                "kind": "client", "start_time": at, "end_time": at, "duration_ms": 1.5, "status_code": "error",
                "status_message": "tab\there, quote ' and \\ backslash", "attributes": {"k": "v\n", "n": [1, 2]},
                "events": [{"name": "e", "attributes": {}}]}

    spans_insert([row("1" * 16, "GET pods"), row("2" * 16, "PUT <status>")])
    spans_insert([row("2" * 16, "again"), row("3" * 16, "POST events")])  # one stored already: the rest goes in
    stored = {s.span_id: s for s in Span.objects.all()}
    assert sorted((s.span_id, s.name) for s in stored.values()) == [
        ("1" * 16, "GET pods"), ("2" * 16, "PUT <status>"), ("3" * 16, "POST events")]
    one = stored["1" * 16]
    assert one.attributes == {"k": "v\n", "n": [1, 2]} and one.events == [{"name": "e", "attributes": {}}]
    assert one.status_message == "tab\there, quote ' and \\ backslash" and one.duration_ms == 1.5
    assert one.start_time == datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def test_tracing_off_installs_nothing(settings):
    from opentelemetry import trace

    from opsconsole.telemetry import tracing

    settings.OPSCONSOLE_TRACING = "off"
    assert tracing.tracing_setup("opsconsole-test") is None
    assert not trace.get_current_span().is_recording()
    assert tracing.current_trace_id() == ""


def test_the_prometheus_config_and_alert_rules_pass_promtool():
    config = subprocess.run(["promtool", "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
                            capture_output=True, text=True, timeout=30)
    assert config.returncode == 0, config.stdout + config.stderr
    files = [DEPLOY / "prometheus" / name for name in ("alerts.yml", "slo.yml")]  # slo.yml: generated
    rules = "".join(path.read_text() for path in files)
    rules_check = subprocess.run(["promtool", "check", "rules", *map(str, files)],
                                 capture_output=True, text=True, timeout=30)
    assert rules_check.returncode == 0, rules_check.stdout + rules_check.stderr
    for alert in ("StuckPending", "ErrorRate", "WorkqueueDepth", "NoLeader", "AnomalyDetected", "RollbackFailed",
                  "RolloutBlocked", "PhaseSLOFastBurn", "PhaseSLOSlowBurn", "ReconcileLoop"):
        assert alert in rules


def test_the_dashboard_only_uses_metrics_opsconsole_exports():
    dashboard = json.loads((DEPLOY / "grafana" / "opsconsole-dashboard.json").read_text())
    exported = {m.name for m in REGISTRY.collect()} | {"opsconsole_resources",
                                                     "opsconsole_resources_oldest_in_phase_seconds"}
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    for expr in exprs:
        for name in re.findall(r"\b((?:controller_runtime|workqueue|rest_client|leader_election|operator|opsconsole)"
                               r"_[a-z_]+)", expr):
            base = re.sub(r"_(bucket|count|sum|total)$", "", name)
            assert base in exported or name in exported, f"{name} in {expr!r} is not exported"
