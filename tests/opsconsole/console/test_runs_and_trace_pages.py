"""The resource detail's collapsed runs and its "Last reconcile" wording; the trace page in context (its run and
resource with links back, the outcome, a failed span's exception in red, a time axis, the tracing UI link only
when configured). Rendered through the Django test client from rows created directly."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from opsconsole.console.views.trace import time_axis
from reconcilers.models import ReconcileRun, Resource, Span
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
TID = "fe" * 16


def _section(html: str, start: str, end: str) -> str:
    i = html.index(start)
    return html[i:html.index(end, i)]


def test_twenty_consecutive_requeue_after_runs_render_as_one_expandable_row(as_role):
    res = f.resource("stuck", phase="Pending")
    t0 = timezone.now() - timedelta(minutes=5)
    first = f.run(res, result="success", at=t0 - timedelta(seconds=5))
    runs = [f.run(res, result="requeue_after", duration=0.05, at=t0 + timedelta(seconds=5 * i)) for i in range(20)]
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    table = _section(html, 'id="runs"', "</table></div>")
    assert table.count('class="run-group"') == 2  # the <tr> and its <details>
    assert "× 20" in table and "1.0 s in all" in table and "phase Pending" in table
    assert f'id="run-group-{runs[0].pk}"' in table and "<details" in table and "<summary>" in table
    assert t0.strftime("%H:%M:%S") + "</time>–" in table
    assert all(f'data-run="{r.pk}"' in table for r in runs)  # each run is inside the group, behind the summary
    assert table.index('data-run="' + str(runs[-1].pk)) < table.index(f'data-run="{first.pk}"')
    assert table.count('<tr class="run"') == 21 and table.count('<tr class="run-group"') == 1


def test_a_failed_resource_whose_last_run_succeeded_says_the_phase_stays_failed(as_role):
    res = f.resource("deadline", phase="Failed", reason="ProgressDeadlineExceeded", last_result="success",
                     last_reconcile_at=timezone.now() - timedelta(seconds=12))
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    line = _section(html, 'id="last-reconcile"', "</dd>")
    assert "badge-ok" not in line and ">success</span>" not in line  # no green "success" next to a red Failed
    assert "ran without error" in line and "the phase stays Failed (ProgressDeadlineExceeded)" in line
    Resource.objects.filter(pk=res.pk).update(last_result="error")
    line = _section(as_role("viewer").get(f"/resources/{res.pk}/").content.decode(), 'id="last-reconcile"', "</dd>")
    assert "badge-bad" in line and "the last reconcile failed" in line


def _failed_trace(res):
    t0 = timezone.now() - timedelta(minutes=1)
    run = ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=t0, duration_seconds=0.12,
                                      result="error", error_class="ApiError", error_message="409 Conflict",
                                      worker="w1", trace_id=TID)
    Span.objects.create(trace_id=TID, span_id="a" * 16, name="reconcile Memcached", service="worker", kind="internal",
                        start_time=t0, end_time=t0 + timedelta(milliseconds=120), duration_ms=120, status_code="error",
                        status_message="ApiError", attributes={"opsconsole.key": res.key, "opsconsole.result": "error"})
    Span.objects.create(trace_id=TID, span_id="b" * 16, parent_span_id="a" * 16, name="PATCH deployments",
                        service="worker", kind="client", start_time=t0 + timedelta(milliseconds=40),
                        end_time=t0 + timedelta(milliseconds=110), duration_ms=70, status_code="error",
                        status_message="Conflict", attributes={"http.status_code": 409},
                        events=[{"name": "exception", "time": t0.isoformat(), "attributes": {
                            "exception.type": "kubernetes.client.ApiException",
                            "exception.message": "(409) the object has been modified",
                            "exception.stacktrace": "Traceback (most recent call last): ..."}}])
    return run


def test_the_trace_page_names_its_run_and_resource_and_marks_a_failure(as_role, settings):
    res = f.resource("web", phase="Failed")
    run = _failed_trace(res)
    client = as_role("viewer")
    html = client.get(f"/traces/{TID}/").content.decode()
    context = _section(html, '<section class="card trace-context', "</section>")
    assert "trace-failed" in context and '<span class="badge badge-bad">failed</span>' in context
    assert "ApiError" in context and "409 Conflict" in context
    assert f'href="/resources/{res.pk}/"' in context and "Memcached default/web" in context
    assert f'data-run="{run.pk}"' in context and f"run #{run.pk}" in context
    assert 'class="table waterfall trace-failed"' in html
    assert "kubernetes.client.ApiException" in html and "(409) the object has been modified" in html
    assert 'class="span-exception"' in html and "stack trace" in html
    axis = _section(html, 'id="time-axis"', "</svg>")
    assert re.findall(r">(\d+) ms</text>", axis)[:3] == ["0", "20", "40"] and 'x="100.0%"' in axis
    assert "Open in the tracing UI" not in html
    settings.OPSCONSOLE_TRACE_UI_URL = "http://jaeger:16686/trace/{trace_id}"
    assert "Open in the tracing UI" not in client.get(f"/traces/{TID}/").content.decode()  # no OTLP: not there
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = "http://jaeger:4318"
    assert f'href="http://jaeger:16686/trace/{TID}"' in client.get(f"/traces/{TID}/").content.decode()


def test_the_time_axis_picks_round_steps_in_ms():
    ticks = time_axis(250.0)
    assert [t["label"] for t in ticks] == ["0 ms", "50 ms", "100 ms", "150 ms", "200 ms", "250 ms"]
    assert ticks[0]["anchor"] == "start" and ticks[-1]["anchor"] == "end" and ticks[-1]["pct"] == 100.0
    assert [t["label"] for t in time_axis(1.5)][:3] == ["0.0 ms", "0.5 ms", "1.0 ms"]


def test_a_trace_of_a_run_that_succeeded_shows_its_outcome_without_failure(as_role):
    res = f.resource("ok")
    t0 = timezone.now()
    ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=t0, duration_seconds=0.01,
                                result="success", worker="w1", trace_id=TID)
    Span.objects.create(trace_id=TID, span_id="c" * 16, name="reconcile Memcached", service="worker",
                        start_time=t0, end_time=t0 + timedelta(milliseconds=10), duration_ms=10, status_code="unset",
                        attributes={"opsconsole.key": res.key})
    html = as_role("viewer").get(f"/traces/{TID}/").content.decode()
    context = _section(html, 'id="trace-context"', "</section>")
    assert "trace-failed" not in html and ">failed<" not in context
    assert "badge-ok" in context and "ended with success" in context and f'href="/resources/{res.pk}/"' in context


def test_the_trace_page_names_the_runs_recorded_duration_and_its_spans(as_role):
    """Run #27 showed 7 ms while its trace showed 33.7 ms: the page says which interval each is."""
    res = f.resource("timed")
    t0 = timezone.now()
    ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=t0, duration_seconds=0.007,
                                result="success", worker="w1", trace_id=TID)
    Span.objects.create(trace_id=TID, span_id="d" * 16, name="reconcile Memcached", service="worker",
                        start_time=t0, end_time=t0 + timedelta(milliseconds=33.7), duration_ms=33.7,
                        status_code="unset", attributes={"opsconsole.key": res.key,
                                                         "opsconsole.run.duration_seconds": 0.007})
    html = as_role("viewer").get(f"/traces/{TID}/").content.decode()
    run = _section(html, 'id="trace-run"', "</dd>")
    assert "7.0 ms to its record" in run or "7 ms to its record" in run, run
    assert "(its span, through record, complete and queue: 33.7 ms)" in run
