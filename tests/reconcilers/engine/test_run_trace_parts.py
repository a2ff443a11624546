"""Traces that add up (issue 43). A run's span starts when the run does and each of its parts is a child span:
`read`, `step`, `record` (holding the transaction, `record reconcile`), `complete`, `keep`, `queue`, with the wait
before it as the `queued` and `claimed` events; the run's recorded duration is the span's start to the start of `record
reconcile`, and the span names it (`opsconsole.run.duration_seconds`). (The first run of a process spent ~0.1 s
looking its operator version up between the measured duration and the record, in no span at all.) The Celery
task's span holds the task's own run, then `drain` with `linger` (the idle wait for a next key), so a task that
lingered two seconds after a 60 ms run says so."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from reconcilers.engine import drain, kube, runner, sampling
from reconcilers.models import ReconcileRun
from tests.reconcilers.testkinds import GADGET, gadget

GADGETS = ["tests.reconcilers.testkinds.GadgetReconciler"]
PARTS = ["read", "step", "record", "complete", "keep", "queue"]
pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def traced() -> Any:
    """Every root sampled, spans kept in memory, the provider current for the test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampling.ReconcileSampler(1.0))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    yield exporter
    trace._TRACER_PROVIDER = previous


def uncovered_ns(parent: Any, children: list[Any]) -> int:
    """The time of `parent` that none of `children` covers."""
    covered, at = 0, parent.start_time
    for child in sorted(children, key=lambda c: c.start_time):
        start, end = max(child.start_time, at), min(child.end_time, parent.end_time)
        if end > start:
            covered, at = covered + end - start, end
    return (parent.end_time - parent.start_time) - covered


def test_a_runs_span_is_made_of_its_parts_and_names_the_recorded_duration(traced, kapi, namespace, workqueue,
                                                                        reconcilers):
    reconcilers(GADGETS)
    kube.create_object(kapi, GADGET, gadget(namespace, "parts", mode="ok"))
    key = GADGET.request(namespace, "parts").key()
    workqueue.add(key)
    runner.run(key)  # a process's first run also builds its registry and API client, as a worker's start does
    traced.clear()
    workqueue.add(key)
    runner.run(key)
    run = ReconcileRun.objects.filter(key=key).latest("id")
    spans = traced.get_finished_spans()
    (root,) = [s for s in spans if s.name == "reconcile Gadget"]
    assert root.parent is None and format(root.context.trace_id, "032x") == run.trace_id
    parts = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert [s.name for s in sorted(parts, key=lambda s: s.start_time)] == PARTS
    assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time for s in parts)
    assert {e.name for e in root.events} >= {"queued", "claimed"} and root.attributes[
        "opsconsole.queue.wait_seconds"] >= 0
    # the recorded duration: the span's start to the record's start, named on the span
    (part,) = [s for s in parts if s.name == "record"]
    (record,) = [s for s in spans if s.name == "record reconcile"]
    assert record.parent.span_id == part.context.span_id
    assert root.attributes["opsconsole.run.duration_seconds"] == pytest.approx(run.duration_seconds, abs=1e-9)
    # it ends inside the `record` part, before `record reconcile` starts (1 ms for the wall clock the spans use
    # against the monotonic one the duration uses; an exact ±2 ms gap failed on a loaded machine)
    ends = root.start_time + run.duration_seconds * 1e9
    assert part.start_time - 1e6 <= ends <= record.start_time + 1e6
    assert abs(root.start_time / 1e9 - run.started_at.timestamp()) < 0.002
    # the parts account for the run: what is between them is bookkeeping, not hidden work (a fifth, or 8 ms: on a
    # loaded CI machine 4.9 ms of a 30 ms run fell between the parts; hidden work, a query or a request, is more)
    duration = root.end_time - root.start_time
    assert uncovered_ns(root, parts) < max(0.2 * duration, 8_000_000), (uncovered_ns(root, parts), duration)


def test_the_tasks_span_accounts_for_its_drain_and_its_linger(traced, kapi, namespace, workqueue, reconcilers,
                                                             settings, monkeypatch):
    reconcilers(GADGETS)
    settings.OPSCONSOLE_DRAIN_LINGER_SECONDS = 0.4
    monkeypatch.setattr(drain, "_linger_node", None)  # outside a worker: lingering not capped
    kube.create_object(kapi, GADGET, gadget(namespace, "task", mode="ok"))
    key = GADGET.request(namespace, "task").key()
    workqueue.add(key)
    with sampling.tracer("test").start_as_current_span("run/reconcilers.reconcile"):  # as Celery's would be
        runner.run(key, drain=True)
    spans = traced.get_finished_spans()
    (task,) = [s for s in spans if s.name == "run/reconcilers.reconcile"]
    children = [s for s in spans if s.parent is not None and s.parent.span_id == task.context.span_id]
    assert sorted(s.name for s in children) == ["drain", "reconcile Gadget"]
    (drained,) = [s for s in children if s.name == "drain"]
    (linger,) = [s for s in spans if s.name == "linger"]
    assert linger.parent.span_id == drained.context.span_id and drained.attributes["opsconsole.drain.keys"] == 0
    assert (linger.end_time - linger.start_time) / 1e9 >= 0.35  # the idle wait, shown as such
    duration = task.end_time - task.start_time
    assert uncovered_ns(task, children) < max(0.15 * duration, 5_000_000)
