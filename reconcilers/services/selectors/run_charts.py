"""The overview's charts (issue 18): the reconcile runs of a window per bucket (runs, errors and duration
quantiles), in one aggregate query on PostgreSQL, bucketed and ranked in Python on SQLite.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Count, DateTimeField, F, FloatField, Func, IntegerField, Q, Value

from reconcilers.models import ReconcileRun, RunResult
from reconcilers.services.selectors.filters import namespace_q


class _PercentileDisc(Aggregate):
    """PERCENTILE_DISC(fraction) WITHIN GROUP (ORDER BY expr): the nearest-rank quantile (a value of the set)."""

    function = "PERCENTILE_DISC"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def run_buckets(
    start: datetime,
    end: datetime,
    step: timedelta,
    *,
    quantiles: tuple[float, ...] = (0.5, 0.99),
    namespaces: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """The reconcile runs started in [start, end) in buckets of `step` from `start`: one dict per bucket, oldest
    first, {"start", "runs", "errors", "quantiles": {q: seconds or None}} (runs and errors 0, quantiles None
    for a bucket without runs); runs by their resource's namespace when limited to `namespaces`.

    One query: a range scan of the index on started_at, grouped by bucket number, counting runs and errors and
    taking each duration quantile (nearest rank, as `DatabaseMetricsSource` does) per bucket. SQLite (the
    embedded default) has neither EXTRACT nor PERCENTILE_DISC: there the same range scan reads the window's
    (started_at, duration, result) and the buckets are computed here."""
    seconds = step.total_seconds()
    if seconds <= 0 or end <= start:
        return []
    n = math.ceil((end - start).total_seconds() / seconds - 1e-9)
    if connection.vendor != "postgresql":
        return _run_buckets_read(start, end, step, n, quantiles, namespaces)
    bucket = Func(F("started_at"), Value(start, output_field=DateTimeField()), arg_joiner=" - ",
                  template=f"CAST(FLOOR(EXTRACT(EPOCH FROM (%(expressions)s)) / {float(seconds)!r}) AS integer)",
                  output_field=IntegerField())
    # COUNT(*), not COUNT(id): the window is read from the index on started_at alone (it carries the duration
    # and the result, not the id)
    figures: dict[str, Any] = {"runs": Count("*"), "errors": Count("result", filter=Q(result=RunResult.ERROR))}
    for i, q in enumerate(quantiles):
        figures[f"q{i}"] = _PercentileDisc("duration_seconds", fraction=float(q))
    rows = (ReconcileRun.objects.filter(namespace_q(namespaces, column="resource__namespace"),
                                        started_at__gte=start, started_at__lt=end)
            .annotate(bucket=bucket).values("bucket").annotate(**figures).order_by())
    out = [{"start": start + step * i, "runs": 0, "errors": 0, "quantiles": dict.fromkeys(quantiles)}
           for i in range(n)]
    for row in rows:
        if 0 <= row["bucket"] < n:
            out[row["bucket"]].update(runs=row["runs"], errors=row["errors"],
                                      quantiles={q: row[f"q{i}"] for i, q in enumerate(quantiles)})
    return out


def _run_buckets_read(start: datetime, end: datetime, step: timedelta, n: int, quantiles: tuple[float, ...],
                      namespaces: frozenset[str] | None) -> list[dict[str, Any]]:
    """`run_buckets` without SQL percentiles: the window's runs read once, bucketed and ranked in Python."""
    seconds = step.total_seconds()
    durations: list[list[float]] = [[] for _ in range(n)]
    errors = [0] * n
    rows = (ReconcileRun.objects.filter(namespace_q(namespaces, column="resource__namespace"),
                                        started_at__gte=start, started_at__lt=end)
            .values_list("started_at", "duration_seconds", "result").iterator(chunk_size=5000))
    for started_at, duration, result in rows:
        i = int((started_at - start).total_seconds() // seconds)
        if 0 <= i < n:
            durations[i].append(float(duration or 0.0))
            errors[i] += result == RunResult.ERROR
    out = []
    for i in range(n):
        ranked = sorted(durations[i])
        figures = {q: (ranked[max(0, math.ceil(q * len(ranked)) - 1)] if ranked else None) for q in quantiles}
        out.append({"start": start + step * i, "runs": len(ranked), "errors": errors[i], "quantiles": figures})
    return out
