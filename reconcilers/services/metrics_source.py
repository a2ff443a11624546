"""Where `metrics/summary` (and the console's charts) get their numbers: one interface, `MetricsSource`, over
a time range (defined in `metrics_protocol`, importable from here too), and `DatabaseMetricsSource`, computed
from the database (ReconcileRun, the maintained counts of transitions and resources) and the workqueue, so the
embedded setup shows figures without Prometheus. A Prometheus-backed source (`metrics_prometheus`, imported only
when configured) implements the same protocol; `metrics_source_get()` picks one.

Rates are per second over [start, end); latencies are reconcile durations in seconds; `kind` narrows to one
Kind (None: all). Aggregates only: no resource names.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime

from django.conf import settings
from django.utils.module_loading import import_string

from reconcilers.models import ReconcileRun, RunResult
from reconcilers.services.metrics_protocol import QUANTILES, MetricsSource  # still importable from here
from reconcilers.services.selectors import aggregates
from reconcilers.services.selectors.filters import namespace_q

log = logging.getLogger(__name__)


def _seconds(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds(), 1e-9)


class DatabaseMetricsSource:
    """MetricsSource computed from the database and the workqueue; with `namespaces`, over those namespaces
    only (runs by their resource's namespace: a run whose object was never mirrored is left out; the queue
    depth over the keys of those namespaces)."""

    name = "database"

    def __init__(self, namespaces: frozenset[str] | None = None) -> None:
        self.namespaces = namespaces

    def _runs(self, start: datetime, end: datetime, kind: str | None):  # noqa: ANN202 - a QuerySet
        qs = ReconcileRun.objects.filter(namespace_q(self.namespaces, column="resource__namespace"),
                                         started_at__gte=start, started_at__lt=end)
        return qs.filter(kind=kind) if kind else qs

    def reconcile_rate(self, start: datetime, end: datetime, kind: str | None = None) -> float:
        """Reconciles per second."""
        return self._runs(start, end, kind).count() / _seconds(start, end)

    def error_rate(self, start: datetime, end: datetime, kind: str | None = None) -> float:
        """Reconciles that ended in error, per second."""
        return self._runs(start, end, kind).filter(result=RunResult.ERROR).count() / _seconds(start, end)

    def reconcile_time_quantiles(
        self, start: datetime, end: datetime, quantiles: tuple[float, ...] = QUANTILES, kind: str | None = None
    ) -> dict[float, float | None]:
        """Nearest-rank quantiles of the runs' durations (one indexed lookup per quantile)."""
        runs = self._runs(start, end, kind)
        n = runs.count()
        out: dict[float, float | None] = {}
        ordered = runs.order_by("duration_seconds").values_list("duration_seconds", flat=True)
        for q in quantiles:
            if n == 0:
                out[q] = None
                continue
            index = min(n - 1, max(0, math.ceil(q * n) - 1))
            out[q] = float(ordered[index])
        return out

    def queue_depth(self) -> int | None:
        """The workqueue's depth, read from Redis."""
        try:
            if self.namespaces is not None:
                from reconcilers.services.selectors.queue import queue_snapshot

                return int(queue_snapshot(namespaces=self.namespaces, limit=0)["depth"])
            from reconcilers.engine import dispatch

            return int(dispatch.get_queue().snapshot(limit=0).depth)
        except Exception as exc:  # metrics never fail the page
            log.info("queue depth not read: %s", exc)
            return None

    def transitions_per_kind(self, start: datetime, end: datetime) -> dict[str, int]:
        """Transitions per Kind over the range (whole hours from the maintained counts, the ends from the trail)."""
        return dict(sorted(aggregates.transitions_per_kind(start, end, namespaces=self.namespaces).items()))

    def phase_counts(self) -> dict[str, dict[str, int]]:
        """Resources per Kind and phase (the maintained counts)."""
        return {kind: {phase or "(none)": n for phase, n in sorted(phases.items())}
                for kind, phases in sorted(aggregates.phase_counts(namespaces=self.namespaces).items())}


def metrics_source_get() -> MetricsSource:
    """The configured source: `settings.OPSCONSOLE_METRICS_SOURCE` (a dotted path to a class built with no
    arguments) when set, else Prometheus when `settings.PROMETHEUS_URL` is set, else the database."""
    path = getattr(settings, "OPSCONSOLE_METRICS_SOURCE", "") or ""
    if path:
        return import_string(path)()
    # -- observability (issue 5): Prometheus when PROMETHEUS_URL is set --------------------------------------
    url = getattr(settings, "PROMETHEUS_URL", None)
    if url:
        from reconcilers.services.metrics_prometheus import PrometheusMetricsSource

        return PrometheusMetricsSource(url)
    # -- end observability ---------------------------------------------------------------------------------
    return DatabaseMetricsSource()


def metrics_source_for(namespaces: frozenset[str] | None) -> MetricsSource:
    """The source for a caller limited to `namespaces`: the configured one (`metrics_source_get`) for a caller
    with every namespace; for a limited caller the database, over its namespaces only, whatever is configured
    (the Prometheus series -- controller_runtime_reconcile_*, opsconsole_transitions_total, opsconsole_resources,
    workqueue_depth -- carry no namespace label, so they cannot be narrowed to a caller's namespaces)."""
    if namespaces is None:
        return metrics_source_get()
    return DatabaseMetricsSource(namespaces)


def metrics_summary(source: MetricsSource, start: datetime, end: datetime, kind: str | None = None) -> dict:
    """The summary the API and the console show, from any source."""
    rate = source.reconcile_rate(start, end, kind)
    errors = source.error_rate(start, end, kind)
    q = source.reconcile_time_quantiles(start, end, QUANTILES, kind)
    return {
        "source": source.name,
        "start": start,
        "end": end,
        "kind": kind or "",
        "reconcile_rate": rate,
        "error_rate": errors,
        "error_ratio": (errors / rate) if rate else 0.0,
        "reconcile_time_seconds": {"p50": q.get(0.5), "p95": q.get(0.95), "p99": q.get(0.99)},
        "queue_depth": source.queue_depth(),
        "transitions_per_kind": source.transitions_per_kind(start, end),
        "phase_counts": source.phase_counts(),
    }
