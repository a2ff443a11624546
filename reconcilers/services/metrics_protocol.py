"""The interface of the console's figures: `MetricsSource`, and the reconcile time quantiles it reports by
default (`QUANTILES`).

Its own module so that both implementations can import it without importing each other:
`metrics_source` (the database source, and `metrics_source_get()`, which picks a source) and
`metrics_prometheus` (the Prometheus source, imported lazily: prometheus-api-client is heavy to import).
No Django, no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

#: the reconcile time quantiles of the metrics summary
QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)


@runtime_checkable
class MetricsSource(Protocol):
    """The figures of the metrics summary, over a time range."""

    name: str

    def reconcile_rate(self, start: datetime, end: datetime, kind: str | None = None) -> float:
        """Reconciles per second."""
        ...

    def error_rate(self, start: datetime, end: datetime, kind: str | None = None) -> float:
        """Reconciles that ended in error, per second."""
        ...

    def reconcile_time_quantiles(
        self, start: datetime, end: datetime, quantiles: tuple[float, ...] = QUANTILES, kind: str | None = None
    ) -> dict[float, float | None]:
        """Reconcile duration quantiles in seconds (None when there was no reconcile)."""
        ...

    def queue_depth(self) -> int | None:
        """Keys waiting for a worker now (None when the queue cannot be read)."""
        ...

    def transitions_per_kind(self, start: datetime, end: datetime) -> dict[str, int]:
        """Recorded transitions per Kind."""
        ...

    def phase_counts(self) -> dict[str, dict[str, int]]:
        """Resources per Kind and phase, now (deleted ones excluded)."""
        ...
