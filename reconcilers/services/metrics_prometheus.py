"""`PrometheusMetricsSource`: the console's figures read from Prometheus (prometheus-api-client) when
`PROMETHEUS_URL` is set, in the shapes `DatabaseMetricsSource` gives (see `metrics_source`): it implements
`metrics_protocol.MetricsSource`. It imports nothing of `metrics_source`, which imports it lazily (an
import-linter contract keeps the two from forming a cycle).

PromQL over the range [start, end): counts are the difference of the summed counters at `end` and at
`start` (exact when no counter reset in between: the worker's counters are the sum of its prefork
children; after a reset, `increase()` over the range instead), rates are those counts over the range's
seconds, quantiles come from the reconcile time histogram (`histogram_quantile` over `increase` of the
buckets), queue depth and phase counts are the current gauges (the controller's `workqueue_depth`, the
web's `opsconsole_resources`). `kind` narrows to one Kind through the `controller` label (the kind,
lower-cased) or the `kind` label.
"""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import Any

from prometheus_api_client import PrometheusConnect

from reconcilers.services.metrics_protocol import QUANTILES

log = logging.getLogger(__name__)

RECONCILES = "controller_runtime_reconcile_total"
RECONCILE_TIME = "controller_runtime_reconcile_time_seconds_bucket"
TRANSITIONS = "opsconsole_transitions_total"
TIME_IN_PHASE = "opsconsole_time_in_phase_seconds_bucket"


def _selector(**labels: str | None) -> str:
    """`{a="x",b="y"}` for the labels given (None ones left out); '' for none."""
    parts = [f'{name}="{_escape(value)}"' for name, value in labels.items() if value is not None]
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _range(start: datetime, end: datetime) -> str:
    return f"{max(1, math.ceil((end - start).total_seconds()))}s"


def _seconds(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds(), 1e-9)


class PrometheusMetricsSource:
    """MetricsSource computed by PromQL on a Prometheus server."""

    name = "prometheus"

    def __init__(self, url: str, *, timeout: float = 5.0, client: Any = None) -> None:
        self.url = url
        self.timeout = timeout
        self.client = client or PrometheusConnect(url=url, disable_ssl=True)

    # -- queries -------------------------------------------------------------------------------------------

    def query(self, promql: str, at: datetime | None = None) -> list[dict[str, Any]]:
        """One instant query (at `at`, default now): the result vector."""
        params: dict[str, Any] = {"timeout": f"{max(1, round(self.timeout * 1000))}ms"}
        if at is not None:
            params["time"] = at.timestamp()
        return list(self.client.custom_query(promql, params=params) or [])

    def _scalar(self, promql: str, at: datetime | None = None) -> float | None:
        result = self.query(promql, at)
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) else value

    def _by(self, promql: str, label: str, at: datetime | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for row in self.query(promql, at):
            value = float(row["value"][1])
            if not math.isnan(value):
                out[row["metric"].get(label, "")] = value
        return out

    def count(self, metric: str, start: datetime, end: datetime, selector: str = "", by: str | None = None
              ) -> dict[str, float]:
        """How much the summed counter grew over [start, end) (grouped by `by`; key '' without)."""
        group = f" by ({by})" if by else ""
        key = by or ""
        resets = self._scalar(f"sum(resets({metric}{selector}[{_range(start, end)}]))", end) or 0.0
        if resets > 0:
            return self._by(f"sum{group}(increase({metric}{selector}[{_range(start, end)}]))", key, end)
        at_end = self._by(f"sum{group}({metric}{selector})", key, end)
        at_start = self._by(f"sum{group}({metric}{selector})", key, start)
        return {k: max(0.0, v - at_start.get(k, 0.0)) for k, v in at_end.items()}

    def growth(self, series: str, by: str, start: datetime, end: datetime) -> str:
        """PromQL for how much the summed counters `series` grew over [start, end], grouped by `by`.

        Like `count`, it is the value at the end less the value at the start (0 for a series that did not exist
        yet), not increase(): a series born mid-range with everything already counted (a prefork child's first
        samples) would otherwise show no growth at all. increase() is used only when a counter reset."""
        resets = self._scalar(f"sum(resets({series}[{_range(start, end)}]))", end) or 0.0
        if resets > 0:
            return f"sum by ({by})(increase({series}[{_range(start, end)}]))"
        at_end = f"sum by ({by})({series} @ {end.timestamp():.3f})"
        at_start = f"sum by ({by})({series} @ {start.timestamp():.3f})"
        return f"({at_end} - ({at_start} or {at_end} * 0))"

    # -- the MetricsSource protocol ------------------------------------------------------------------------

    def reconcile_count(self, start: datetime, end: datetime, kind: str | None = None,
                        result: str | None = None) -> int:
        """Reconciles over the range (of one result when given)."""
        selector = _selector(controller=kind.lower() if kind else None, result=result)
        return round(self.count(RECONCILES, start, end, selector).get("", 0.0))

    def reconcile_rate(self, start: datetime, end: datetime, kind: str | None = None) -> float:
        """Reconciles per second."""
        return self.reconcile_count(start, end, kind) / _seconds(start, end)

    def error_rate(self, start: datetime, end: datetime, kind: str | None = None) -> float:
        """Reconciles that ended in error, per second."""
        return self.reconcile_count(start, end, kind, result="error") / _seconds(start, end)

    def reconcile_time_quantiles(
        self, start: datetime, end: datetime, quantiles: tuple[float, ...] = QUANTILES, kind: str | None = None
    ) -> dict[float, float | None]:
        """Quantiles of the reconcile time histogram over the range (None when there was no reconcile)."""
        selector = _selector(controller=kind.lower() if kind else None)
        buckets = self.growth(f"{RECONCILE_TIME}{selector}", "le", start, end)
        return {q: self._scalar(f"histogram_quantile({q}, {buckets})", end) for q in quantiles}

    def queue_depth(self) -> int | None:
        """Keys waiting for a worker now (the controller's workqueue_depth), None when Prometheus has none."""
        try:
            value = self._scalar("sum(workqueue_depth)")
        except Exception as exc:  # metrics never fail the page
            log.info("queue depth not read from Prometheus: %s", exc)
            return None
        return None if value is None else int(value)

    def transitions_per_kind(self, start: datetime, end: datetime) -> dict[str, int]:
        """Recorded transitions per Kind over the range (Kinds with none left out, as the database does)."""
        counts = self.count(TRANSITIONS, start, end, by="kind")
        return {kind: round(n) for kind, n in sorted(counts.items()) if round(n) > 0}

    def phase_counts(self) -> dict[str, dict[str, int]]:
        """Resources per Kind and phase now (from the web's opsconsole_resources; empty phases left out)."""
        out: dict[str, dict[str, int]] = {}
        for row in self.query("max by (kind, phase)(opsconsole_resources)"):
            n = round(float(row["value"][1]))
            if n > 0:
                out.setdefault(row["metric"].get("kind", ""), {})[row["metric"].get("phase") or "(none)"] = n
        return dict(sorted(out.items()))

    def time_in_phase_quantiles(
        self, start: datetime, end: datetime, quantiles: tuple[float, ...] = QUANTILES, kind: str | None = None
    ) -> dict[str, dict[float, float | None]]:
        """Per phase: quantiles of how long resources stayed in it before leaving it, over the range."""
        selector = _selector(kind=kind)
        buckets = self.growth(f"{TIME_IN_PHASE}{selector}", "phase, le", start, end)
        out: dict[str, dict[float, float | None]] = {}
        for q in quantiles:
            for phase, value in self._by(f"histogram_quantile({q}, {buckets})", "phase", end).items():
                out.setdefault(phase, {})[q] = value
        return out
