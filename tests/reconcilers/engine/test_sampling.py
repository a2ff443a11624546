"""Head sampling of reconcile traces (reconcilers.engine.sampling): a root is sampled by the ratio and a child
follows its parent; a span that asks to be kept is; and through runner.run against kubesim, the database and
Redis with the ratio at 0: a run that went well leaves no trace (its record links none), while a run that ended
in an error, a slow one and one that handled a manual request each keep one span that their record links to."""

from __future__ import annotations

import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import SpanContext, TraceFlags

from reconcilers.engine import dispatch, kube, runner, sampling
from reconcilers.models import ReconcileRun
from reconcilers.services import reconcile_requests
from tests.reconcilers.testkinds import GADGET, gadget

GADGETS = ["tests.reconcilers.testkinds.GadgetReconciler"]


def parent(sampled: bool) -> object:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    span = trace.NonRecordingSpan(SpanContext(0x1234, 0x99, is_remote=True, trace_flags=flags))
    return trace.set_span_in_context(span)


def test_roots_follow_the_ratio_children_their_parent_and_a_kept_span_is_kept():
    never, always = sampling.ReconcileSampler(0.0), sampling.ReconcileSampler(1.0)
    assert never.should_sample(None, 0xABC, "run").decision is Decision.DROP
    assert always.should_sample(None, 0xABC, "run").decision is Decision.RECORD_AND_SAMPLE
    assert never.should_sample(parent(True), 0x1234, "child").decision is Decision.RECORD_AND_SAMPLE
    assert always.should_sample(parent(False), 0x1234, "child").decision is Decision.DROP
    kept = never.should_sample(None, 0xABC, "kept", attributes={sampling.KEEP_ATTRIBUTE: "error"})
    assert kept.decision is Decision.RECORD_AND_SAMPLE
    half = sampling.ReconcileSampler(0.5)
    sampled = sum(half.should_sample(None, t * 0x9E3779B97F4A7C15 % (1 << 128), "run").decision.is_sampled()
                  for t in range(1, 2001))
    assert 850 < sampled < 1150  # by trace id: about half
    assert sampling.ReconcileSampler(7).ratio == 1.0 and "ratio=0.5" in half.get_description()


def test_why_a_run_is_kept():
    assert sampling.why_keep("error", 0.01, 1.0, False) == "error"
    assert sampling.why_keep("success", 0.01, 1.0, True) == "request"
    assert sampling.why_keep("success", 2.5, 1.0, False) == "slow"
    assert sampling.why_keep("success", 0.01, 1.0, False) == ""
    assert sampling.why_keep("requeue", 9.0, 0, False) == ""  # 0: slow runs are not kept for being slow


@pytest.fixture
def traced(settings):
    """A provider sampling no root (ratio 0), spans kept in memory, current for the test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampling.ReconcileSampler(0.0))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    settings.OPSCONSOLE_TRACE_SLOW_SECONDS = 30.0
    yield exporter
    trace._TRACER_PROVIDER = previous


def test_keep_unsampled_writes_one_root_span_started_when_the_run_started(traced):
    started = time.time_ns() - 2_000_000_000
    trace_id = sampling.keep_unsampled("reconcile Gadget", started, {"opsconsole.key": "k"}, "error", "Boom")
    (span,) = traced.get_finished_spans()
    assert format(span.context.trace_id, "032x") == trace_id and span.parent is None
    assert span.start_time == started and span.end_time - span.start_time >= 2_000_000_000
    assert span.attributes[sampling.KEEP_ATTRIBUTE] == "error" and span.status.description == "Boom"


@pytest.mark.integration
@pytest.mark.django_db
def test_only_the_runs_worth_a_look_keep_a_trace_when_none_is_sampled(traced, kapi, namespace, workqueue, reconcilers,
                                                                     settings, django_capture_on_commit_callbacks):
    reconcilers(GADGETS)

    def run(name: str, **spec: object) -> ReconcileRun:
        kube.create_object(kapi, GADGET, gadget(namespace, name, **spec))
        key = GADGET.request(namespace, name).key()
        workqueue.add(key)
        runner.run(key)
        return ReconcileRun.objects.filter(key=key).latest("id")

    quiet = run("quiet", mode="ok")
    assert quiet.result == "success" and quiet.trace_id == ""
    assert traced.get_finished_spans() == ()  # not one span of a run that went well

    broken = run("broken", mode="permanent")
    assert broken.result == "error" and broken.trace_id
    (kept,) = traced.get_finished_spans()
    assert format(kept.context.trace_id, "032x") == broken.trace_id
    assert kept.attributes[sampling.KEEP_ATTRIBUTE] == "error" and kept.attributes["opsconsole.name"] == "broken"
    assert kept.attributes["opsconsole.error"].startswith(broken.error_class)
    traced.clear()

    settings.OPSCONSOLE_TRACE_SLOW_SECONDS = 0.000001
    slow = run("slow", mode="ok")
    assert slow.trace_id and traced.get_finished_spans()[0].attributes[sampling.KEEP_ATTRIBUTE] == "slow"
    settings.OPSCONSOLE_TRACE_SLOW_SECONDS = 30.0
    traced.clear()

    key = GADGET.request(namespace, "quiet").key()
    with django_capture_on_commit_callbacks(execute=True):  # the annotation is set once the row is committed
        request = reconcile_requests.reconcile_request_create(key, actor="user:alice", reason="look at it")
    runner.run(key)
    asked = ReconcileRun.objects.filter(key=key).latest("id")
    (span,) = traced.get_finished_spans()
    assert asked.trace_id == format(span.context.trace_id, "032x")
    assert span.attributes[sampling.KEEP_ATTRIBUTE] == "request"
    assert span.attributes["opsconsole.request.token"] == request.token


def test_the_web_process_traces_every_request_and_the_engine_its_share(settings):
    from opsconsole.telemetry.tracing import sample_ratio

    settings.OPSCONSOLE_TRACE_SAMPLE_RATIO = 0.1
    assert sample_ratio("opsconsole-web") == 1.0
    assert sample_ratio("opsconsole-worker") == sample_ratio("opsconsole-controller") == 0.1


def test_a_log_line_in_an_unsampled_span_names_no_trace(traced):
    from opsconsole.logging import current_trace_ids

    with trace.get_tracer("t").start_as_current_span("not sampled"):
        assert current_trace_ids() == ("", "")
    with trace.get_tracer("t").start_as_current_span("kept", attributes={sampling.KEEP_ATTRIBUTE: "x"}) as span:
        assert current_trace_ids()[0] == format(span.get_span_context().trace_id, "032x")


@pytest.mark.integration
@pytest.mark.django_db
def test_a_key_drained_after_the_tasks_own_gets_a_trace_of_its_own(kapi, namespace, workqueue, reconcilers, settings):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampling.ReconcileSampler(1.0))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous, trace._TRACER_PROVIDER = trace._TRACER_PROVIDER, provider
    try:
        reconcilers(GADGETS)
        settings.OPSCONSOLE_WORKQUEUE_MAX_SENT = 1  # the second key waits ready: the first key's task drains it
        dispatch._queues.clear()
        queue = dispatch.get_queue()
        keys = []
        for name in ("first", "drained"):
            kube.create_object(kapi, GADGET, gadget(namespace, name, mode="ok"))
            keys.append(GADGET.request(namespace, name).key())
            queue.add(keys[-1])
        with provider.get_tracer("test").start_as_current_span("run/reconcilers.reconcile") as task:
            runner.run(keys[0], drain=True)
    finally:
        trace._TRACER_PROVIDER = previous
    first, drained = (ReconcileRun.objects.get(key=key) for key in keys)
    assert first.trace_id == format(task.get_span_context().trace_id, "032x")
    assert drained.trace_id and drained.trace_id != first.trace_id
    (root,) = [s for s in exporter.get_finished_spans() if format(s.context.trace_id, "032x") == drained.trace_id
               and s.name == "reconcile Gadget"]
    assert root.parent is None and root.attributes["opsconsole.key"] == keys[1]


def test_a_tracer_is_made_once_per_provider():
    from opentelemetry import trace as api_trace
    from opentelemetry.sdk.trace import TracerProvider

    first, second = TracerProvider(), TracerProvider()
    previous = api_trace._TRACER_PROVIDER
    try:
        api_trace._TRACER_PROVIDER = first
        one = sampling.tracer("opsconsole.test")
        assert sampling.tracer("opsconsole.test") is one and sampling.tracer("opsconsole.other") is not one
        api_trace._TRACER_PROVIDER = second  # a new provider: its own tracer, whose spans it sees
        other = sampling.tracer("opsconsole.test")
        assert other is not one and other.span_processor is second._active_span_processor
    finally:
        api_trace._TRACER_PROVIDER = previous
