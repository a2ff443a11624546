"""Telemetry end to end on real processes (kubesim, a prefork Celery worker, the controller, Prometheus):
one trace from the HTTP request of a manual reconcile through the worker to the status write, stored in
the span table; counters of prefork children adding up in the worker's /metrics; `promtool check metrics`
on every endpoint; Prometheus scraping worker and controller while resources converge, read back through
`PrometheusMetricsSource` and equal to the database. In file order: the controller starts in the third
test (the first two must not have informers racing the API's enqueue)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from kubesim.testing import wait_for
from reconcilers.engine import dispatch, kube, runner
from reconcilers.models import ReconcileRequest, ReconcileRun, Resource, Span, Transition
from reconcilers.services.metrics_prometheus import PrometheusMetricsSource
from reconcilers.services.metrics_source import DatabaseMetricsSource, metrics_summary
from tests.fixtures.engines import wait_idle
from tests.opsconsole.api import factories
from tests.opsconsole.telemetry.conftest import Prometheus, scrape
from tests.reconcilers.testkinds import GADGET, gadget
from tests.support.metrics_read import sample_sum

pytestmark = pytest.mark.integration


def key_of(namespace: str, name: str) -> str:
    return GADGET.request(namespace, name).key()


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


@pytest.fixture
def web_tracing() -> Iterator[None]:
    """This test process as the web: tracing for opsconsole-web with Django instrumented; undone after."""
    from opsconsole.telemetry.tracing import django_instrument, django_uninstrument, tracing_setup, tracing_shutdown

    assert tracing_setup("opsconsole-web", store_interval=0.1) is not None
    django_instrument()
    try:
        yield
    finally:
        django_uninstrument()
        tracing_shutdown()


def test_a_manual_reconcile_over_http_is_one_trace_from_the_request_to_the_status_write(
    engine, kapi, namespace, web_tracing
):
    from opsconsole.accounts.tokens import token_create
    from opsconsole.telemetry.tracing import span_store

    kube.create_object(kapi, GADGET, gadget(namespace, "traced", mode="ok"))
    dispatch.enqueue(key_of(namespace, "traced"))  # no controller here: the first reconcile by hand
    resource = wait_for(lambda: Resource.objects.filter(namespace=namespace, name="traced", phase="Running").first(),
                        timeout=30, interval=0.1)
    first = Transition.objects.filter(resource=resource).order_by("seq").first()
    assert len(first.trace_id) == 32 and first.trace_id == first.run.trace_id  # the worker's own trace

    user = factories.user("tracer", "operator", [namespace])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user, name='t').secret}")
    response = client.post(f"/api/v1/resources/{resource.pk}/reconcile", {"reason": "trace me"}, format="json")
    assert response.status_code == 202, response.content
    request = wait_for(lambda: ReconcileRequest.objects.filter(pk=response.json()["id"], state="succeeded").first(),
                       timeout=30, interval=0.1)
    trace_id = request.trace_id
    assert len(trace_id) == 32 and trace_id != first.trace_id
    assert request.run.trace_id == trace_id  # the run continued the request's trace

    span_store().force_flush(5000)
    wanted = {"POST api/v1/resources/<str:pk>/reconcile", "PATCH gadgets", "send reconcilers.reconcile",
              "run/reconcilers.reconcile", "reconcile Gadget", "GET gadgets", "PUT gadgets/status", "record reconcile"}

    def stored() -> list[Span] | None:
        spans = list(Span.objects.filter(trace_id=trace_id))
        return spans if wanted <= {s.name for s in spans} else None

    spans = wait_for(stored, timeout=20, interval=0.2)
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 1 and roots[0].service == "opsconsole-web" and roots[0].kind == "server"
    assert all(s.parent_span_id in by_id for s in spans if s is not roots[0])  # one tree: no orphan

    def chain(span: Span) -> list[str]:
        names = []
        while span is not None:
            names.append(span.name)
            span = by_id.get(span.parent_span_id)
        return names

    status_write = next(s for s in spans if s.name == "PUT gadgets/status")
    assert status_write.service == "opsconsole-worker"
    path = chain(status_write)
    assert path[:4] == ["PUT gadgets/status", "step", "reconcile Gadget", "run/reconcilers.reconcile"]
    assert path[4] == "send reconcilers.reconcile" and path[-1] == roots[0].name
    reconcile = next(s for s in spans if s.name == "reconcile Gadget")
    attrs = reconcile.attributes
    assert (attrs["opsconsole.namespace"], attrs["opsconsole.name"], attrs["opsconsole.kind"]) == (
        namespace, "traced", "Gadget")
    assert attrs["opsconsole.uid"] == resource.uid and attrs["opsconsole.generation"] == 1
    assert (attrs["opsconsole.phase.from"], attrs["opsconsole.phase.to"], attrs["opsconsole.result"]) == (
        "Running", "Running", "success")


def test_counters_of_the_prefork_children_add_up_in_the_worker_metrics(engine, kapi, namespace):
    before = scrape(engine.worker_port)
    start = datetime.now(UTC)
    names = [f"g{i}" for i in range(16)]
    for name in names:  # slow enough that one child cannot take them all
        kube.create_object(kapi, GADGET, gadget(namespace, name, mode="slow", sleepSeconds=0.15))
        dispatch.enqueue(key_of(namespace, name))
    wait_for(lambda: Resource.objects.filter(namespace=namespace, phase="Running").count() == len(names),
             timeout=60, interval=0.2)
    wait_idle(dispatch.get_queue(), timeout=30)
    after = scrape(engine.worker_port)

    runs = ReconcileRun.objects.filter(started_at__gte=start, kind="Gadget")
    pids = {run.worker.rsplit(":", 1)[-1] for run in runs}
    assert len(pids) == 2, pids  # both children reconciled: the total below is a sum over processes
    total = "controller_runtime_reconcile_total"
    grown = sample_sum(after, total, controller="gadget") - sample_sum(before, total, controller="gadget")
    assert grown == runs.count() >= len(names)
    moved = (sample_sum(after, "opsconsole_transitions_total", kind="Gadget")
             - sample_sum(before, "opsconsole_transitions_total", kind="Gadget"))
    assert moved == Transition.objects.filter(kind="Gadget", created_at__gte=start).count() >= 2 * len(names)
    hist = "controller_runtime_reconcile_time_seconds_count"
    assert sample_sum(after, hist, controller="gadget") - sample_sum(before, hist, controller="gadget") == grown
    # two children, each running up to OPSCONSOLE_DRAIN_THREADS reconciles at once (4 on PostgreSQL, 1 on SQLite)
    most = sample_sum(after, "controller_runtime_max_concurrent_reconciles", controller="gadget")
    assert most == 2 * runner.drain_threads()
    assert sample_sum(after, "controller_runtime_active_workers", controller="gadget") == 0
    calls = sample_sum(after, "rest_client_requests_total", method="PUT", code="200")
    assert calls >= len(names)  # every status write, counted by the children


def test_promtool_accepts_every_metrics_endpoint(engine, kapi, namespace, client):
    kube.create_object(kapi, GADGET, gadget(namespace, "linted", mode="permanent"))
    dispatch.enqueue(key_of(namespace, "linted"))
    wait_for(lambda: Resource.objects.filter(namespace=namespace, name="linted", phase="Failed").first(),
             timeout=30, interval=0.1)
    controller = engine.controller_start()
    web = client.get("/metrics")
    assert web.status_code == 200
    web_text = web.content.decode()
    assert 'opsconsole_resources{kind="Gadget",phase="Failed"} 1.0' in web_text
    assert 'opsconsole_resources{kind="Gadget",phase="Deleted"} 0.0' in web_text  # declared, empty: 0
    worker_text = scrape(engine.worker_port)
    failures = sample_sum(worker_text, "operator_reconcile_failures_total", controller="gadget",
                          reason="PermanentError")
    assert failures == sample_sum(worker_text, "controller_runtime_terminal_reconcile_errors_total") >= 1, worker_text
    controller_text = wait_for(
        lambda: (t := scrape(engine.controller_port)) and 'leader_election_master_status{name=' in t
        and 'workqueue_depth{controller="gadget",name="gadget"}' in t and t, timeout=20, interval=0.2)
    assert 'leader_election_master_status{name="opsconsole-controller"} 1.0' in controller_text, controller.log()
    for name, text in (("web", web_text), ("worker", worker_text), ("controller", controller_text)):
        checked = promtool_check(text)
        assert checked.returncode == 0, f"{name}: {checked.stdout}{checked.stderr}"


def test_prometheus_scraping_worker_and_controller_reads_back_what_the_database_recorded(
    engine, kapi, namespace, tmp_path
):
    engine.controller_start()
    wait_idle(dispatch.get_queue(), timeout=30)  # what the controller's first list enqueued is done
    prom = Prometheus(tmp_path, {"worker": engine.worker_port, "controller": engine.controller_port})
    try:
        prom.wait_up(["worker", "controller"])
        ready = time.time()
        wait_for(lambda: prom.last_scrape("worker") > ready + 1 and prom.last_scrape("controller") > ready + 1,
                 timeout=10, interval=0.2)
        start = datetime.now(UTC)
        for i in range(10):
            kube.create_object(kapi, GADGET, gadget(namespace, f"c{i}", mode="ok"))
        kube.create_object(kapi, GADGET, gadget(namespace, "broken", mode="permanent"))
        kube.create_object(kapi, GADGET, gadget(namespace, "waits", mode="pending", requeueAfter=0.3))
        wait_for(lambda: Resource.objects.filter(namespace=namespace, phase="Running").count() == 10
                 and Resource.objects.filter(namespace=namespace, phase="Failed").exists(), timeout=60, interval=0.2)
        kube.patch_object(kapi, GADGET, namespace, "waits", {"spec": {"mode": "ok"}})
        wait_for(lambda: Resource.objects.filter(namespace=namespace, name="waits", phase="Running").exists(),
                 timeout=30, interval=0.2)
        wait_idle(dispatch.get_queue(), timeout=30)
        idle = time.time()
        wait_for(lambda: prom.last_scrape("worker") > idle + 1 and prom.last_scrape("controller") > idle + 1,
                 timeout=10, interval=0.2)
        end = datetime.now(UTC)

        source = PrometheusMetricsSource(prom.url)
        database = DatabaseMetricsSource()
        runs = ReconcileRun.objects.filter(started_at__gte=start, started_at__lt=end)
        assert source.reconcile_count(start, end) == runs.count() >= 13
        assert source.reconcile_count(start, end, "Gadget", result="error") == runs.filter(result="error").count() >= 1
        assert source.reconcile_count(start, end, result="requeue_after") == runs.filter(
            result="requeue_after").count() >= 1
        assert source.transitions_per_kind(start, end) == database.transitions_per_kind(start, end)
        assert source.transitions_per_kind(start, end)["Gadget"] >= 24
        assert source.reconcile_rate(start, end) == pytest.approx(database.reconcile_rate(start, end))
        assert source.error_rate(start, end, "Gadget") == pytest.approx(database.error_rate(start, end, "Gadget"))
        assert source.queue_depth() == 0
        quantiles = source.reconcile_time_quantiles(start, end)
        assert all(v is not None and 0 < v < 60 for v in quantiles.values()), quantiles
        assert quantiles[0.5] <= quantiles[0.95] <= quantiles[0.99]
        in_phase = source.time_in_phase_quantiles(start, end, kind="Gadget")
        assert in_phase["Pending"][0.5] is not None  # every gadget left Pending
        summary, expected = metrics_summary(source, start, end), metrics_summary(database, start, end)
        assert set(summary) == set(expected) and summary["source"] == "prometheus"
        assert summary["transitions_per_kind"] == expected["transitions_per_kind"]
        assert summary["error_ratio"] == pytest.approx(expected["error_ratio"])
        empty = start - timedelta(hours=1)
        assert source.reconcile_count(empty, empty + timedelta(minutes=5)) == 0
    finally:
        prom.stop()
