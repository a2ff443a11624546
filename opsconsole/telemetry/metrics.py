"""Serving /metrics: the registry of this process, or the aggregate of a prefork pool's children.

A Celery worker's main process serves the sum of its children (prometheus-client multiprocess mode): the
children write samples to PROMETHEUS_MULTIPROC_DIR, which the main process wipes at start. Web and controller
serve their own registry. Output is the Prometheus text format, which `promtool check metrics` accepts.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client import multiprocess as prom_multiprocess


def multiprocess_dir() -> Path | None:
    """The multiprocess directory of this process, when multiprocess mode is on."""
    value = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(value) if value else None


def multiprocess_dir_reset(path: Path) -> None:
    """Empty the directory (samples of a previous run must not be summed in), creating it if needed."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)


def registry_for_scrape() -> CollectorRegistry:
    """The registry /metrics serves: the multiprocess aggregate when on, else this process's default."""
    path = multiprocess_dir()
    if path is None:
        return REGISTRY
    registry = CollectorRegistry()
    prom_multiprocess.MultiProcessCollector(registry, path=str(path))
    return registry


def metrics_server_start(port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - scraped by Prometheus
    """Serve /metrics on port from a background thread (worker main process, controller)."""
    start_http_server(port, addr=addr, registry=registry_for_scrape())


def reconciler_metrics_init(concurrency: int | None = None) -> None:
    """Every label pair of every registered reconciler at 0 (and, in a process that runs reconciles,
    `controller_runtime_max_concurrent_reconciles`); never raises (a bad registry is reported elsewhere)."""
    import logging

    from reconcilers.engine import metrics, registry

    try:
        for rec in registry.registered():
            metrics.reconciler_label_pairs_init(rec)
            if concurrency is not None:
                metrics.MAX_CONCURRENT_RECONCILES.labels(rec.name).set(concurrency)
    except Exception:
        logging.getLogger(__name__).warning("reconciler metrics not initialised", exc_info=True)


def child_exited(pid: int) -> None:
    """Tell multiprocess mode a pool child is gone (its live gauges stop counting)."""
    if multiprocess_dir() is not None:
        prom_multiprocess.mark_process_dead(pid)
