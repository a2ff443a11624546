"""The overview's charts: reconcile rate, error rate and p50/p99 reconcile time over a window the reader picks
(15 min, 1 h, 24 h; `window_get` validates the `?window=` value), in buckets that fit it (30 s, 1 min, 15 min)
so a fresh start spreads over the buckets instead of one spike, drawn full width with a clock-time axis and
units (`linechart`).

The figures come from the configured `MetricsSource` (`metrics_source_for`: Prometheus when configured, the
database otherwise) and cost one read per series for the whole window: the database in one aggregate query
(`run_charts.run_buckets`), Prometheus in one range query per series with step = the bucket size. Any other source
is read bucket by bucket through the protocol."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.safestring import SafeString

from opsconsole.console.linechart import line_chart_svg, time_ticks
from reconcilers.services.metrics_source import DatabaseMetricsSource, MetricsSource, metrics_source_for
from reconcilers.services.selectors import run_charts

log = logging.getLogger(__name__)

QUANTILES = (0.5, 0.99)


@dataclass(frozen=True)
class Window:
    """A chart window: its `?window=` value, its label, its span, its bucket size and its time-axis tick."""

    key: str
    label: str
    span: timedelta
    step: timedelta
    tick: timedelta

    @property
    def buckets(self) -> int:
        """How many buckets cover the window."""
        return math.ceil(self.span / self.step)

    @property
    def step_label(self) -> str:
        """The bucket size in words: 30 s, 1 min, 15 min."""
        seconds = int(self.step.total_seconds())
        return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min"


WINDOWS: dict[str, Window] = {
    "15m": Window("15m", "15 min", timedelta(minutes=15), timedelta(seconds=30), timedelta(minutes=5)),
    "1h": Window("1h", "1 h", timedelta(hours=1), timedelta(minutes=1), timedelta(minutes=15)),
    "24h": Window("24h", "24 h", timedelta(hours=24), timedelta(minutes=15), timedelta(hours=3)),
}
DEFAULT_WINDOW = "1h"


def window_get(value: str | None) -> Window:
    """The window named by a `?window=` value; the default (1 h) for a missing or unknown one."""
    return WINDOWS.get(value or "", WINDOWS[DEFAULT_WINDOW])


@dataclass
class _Series:
    rate: list[float | None]
    errors: list[float | None]
    quantiles: dict[float, list[float | None]]


def _database_series(src: DatabaseMetricsSource, start: datetime, end: datetime, window: Window) -> _Series:
    seconds = window.step.total_seconds()
    rows = run_charts.run_buckets(start, end, window.step, quantiles=QUANTILES, namespaces=src.namespaces)
    return _Series(rate=[row["runs"] / seconds for row in rows], errors=[row["errors"] / seconds for row in rows],
                   quantiles={q: [row["quantiles"][q] for row in rows] for q in QUANTILES})


def _prometheus_series(src: Any, start: datetime, end: datetime, window: Window) -> _Series:
    """One range query per series, evaluated at each bucket's end with step = the bucket size."""
    from reconcilers.services.metrics_prometheus import RECONCILE_TIME, RECONCILES

    seconds = int(window.step.total_seconds())
    n = window.buckets

    def read(promql: str) -> list[float | None]:
        out: list[float | None] = [None] * n
        result = src.client.custom_query_range(promql, start_time=start + window.step, end_time=end,
                                               step=f"{seconds}s",
                                               params={"timeout": f"{max(1, round(src.timeout * 1000))}ms"})
        for row in (result or [])[:1]:
            for ts, value in row.get("values", []):
                index = round((float(ts) - start.timestamp()) / seconds) - 1
                v = float(value)
                if 0 <= index < n and not math.isnan(v):
                    out[index] = v
        return out

    window_range = f"[{seconds}s]"
    return _Series(
        rate=read(f"sum(increase({RECONCILES}{window_range})) / {seconds}"),
        errors=read(f'sum(increase({RECONCILES}{{result="error"}}{window_range})) / {seconds}'),
        quantiles={q: read(f"histogram_quantile({q}, sum by (le)(increase({RECONCILE_TIME}{window_range})))")
                   for q in QUANTILES},
    )


def _protocol_series(src: MetricsSource, start: datetime, window: Window) -> _Series:
    series = _Series(rate=[], errors=[], quantiles={q: [] for q in QUANTILES})
    for i in range(window.buckets):
        a, b = start + window.step * i, start + window.step * (i + 1)
        series.rate.append(src.reconcile_rate(a, b))
        series.errors.append(src.error_rate(a, b))
        figures = src.reconcile_time_quantiles(a, b, QUANTILES)
        for q in QUANTILES:
            series.quantiles[q].append(figures.get(q))
    return series


def _ms(values: list[float | None]) -> list[float | None]:
    return [None if v is None else v * 1000.0 for v in values]


def overview_charts(
    *, window: Window | None = None, source: MetricsSource | None = None,
    namespaces: frozenset[str] | None = None, now: datetime | None = None,
) -> dict[str, object]:
    """{"source", "error", "window", "charts": [svg, ...]} for the last `window` (default 1 h) up to `now`, over
    the caller's `namespaces` (`metrics_source_for`); a source that fails is reported in "error", never raised."""
    window = window or WINDOWS[DEFAULT_WINDOW]
    end = now or timezone.now()
    start = end - window.span
    try:
        src = source or metrics_source_for(namespaces)
        if isinstance(src, DatabaseMetricsSource):
            series = _database_series(src, start, end, window)
        elif getattr(src, "name", "") == "prometheus" and hasattr(src, "client"):
            series = _prometheus_series(src, start, end, window)
        else:
            series = _protocol_series(src, start, window)
    except Exception as exc:  # the charts never fail the page: they say what went wrong
        log.warning("metrics not read: %s", exc)
        return {"source": "", "error": f"The metrics source did not answer: {type(exc).__name__}: {exc}",
                "charts": [], "window": window}
    ticks = time_ticks(start, end, window.tick)
    span = (start, end)
    about = f"over the last {window.label} in {window.step_label} buckets"

    def chart(key: str, title: str, lines: list[tuple[str, list[float | None]]], unit: str,
              fmt: Callable[[float], str] | None = None) -> SafeString:
        extra = {"fmt": fmt} if fmt else {}
        return line_chart_svg(title, lines, window=span, ticks=ticks, unit=unit, chart_id=f"chart-{key}",
                              description=f"{title} {about}", **extra)

    charts: list[SafeString] = [
        chart("rate", "Reconciles per second", [("reconciles", series.rate)], "reconciles/s"),
        chart("errors", "Errors per second", [("errors", series.errors)], "errors/s"),
        chart("time", "Reconcile time", [("p50", _ms(series.quantiles[0.5])), ("p99", _ms(series.quantiles[0.99]))],
              "ms"),
    ]
    return {"source": src.name, "error": "", "charts": charts, "window": window}
