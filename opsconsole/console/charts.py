"""The overview's charts: reconcile rate, error rate and p50/p99 reconcile time per bucket over the last
hour, read bucket by bucket through the configured `MetricsSource` (database or Prometheus), drawn as SVG."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.safestring import SafeString

from opsconsole.console.diagrams import line_chart_svg
from opsconsole.console.templatetags.console import duration
from reconcilers.services.metrics_source import MetricsSource, metrics_source_for

log = logging.getLogger(__name__)


def _buckets(end: datetime, span: timedelta, n: int) -> list[tuple[datetime, datetime]]:
    step = span / n
    start = end - span
    return [(start + step * i, start + step * (i + 1)) for i in range(n)]


def overview_charts(
    *, span: timedelta = timedelta(hours=1), buckets: int = 12, source: MetricsSource | None = None,
    namespaces: frozenset[str] | None = None,
) -> dict[str, object]:
    """{"source", "error", "charts": [svg, ...]} for the last `span` in `buckets` buckets, over the caller's
    `namespaces` (`metrics_source_for`)."""
    end = timezone.now()
    try:
        src = source or metrics_source_for(namespaces)
        rate, errors, p50, p99 = [], [], [], []
        for a, b in _buckets(end, span, buckets):
            rate.append(src.reconcile_rate(a, b))
            errors.append(src.error_rate(a, b))
            q = src.reconcile_time_quantiles(a, b, (0.5, 0.99))
            p50.append(q.get(0.5))
            p99.append(q.get(0.99))
    except Exception as exc:  # the charts never fail the page: they say what went wrong
        log.warning("metrics not read: %s", exc)
        return {"source": "", "error": f"The metrics source did not answer: {type(exc).__name__}: {exc}",
                "charts": []}
    labels = (f"-{int(span.total_seconds() // 60)} min", "now")
    charts: list[SafeString] = [
        line_chart_svg("Reconciles per second", [("rate", rate)], labels=labels),
        line_chart_svg("Errors per second", [("errors", errors)], labels=labels),
        line_chart_svg("Reconcile time", [("p50", p50), ("p99", p99)], labels=labels, fmt=duration),
    ]
    return {"source": src.name, "error": "", "charts": charts}
