"""Reading the engine's metrics in tests: a process's /metrics page, or a worker's prometheus-client
multiprocess directory (what its /metrics would serve), and summing samples by name and labels."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> str:
    """The text of http://127.0.0.1:<port>/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:  # noqa: S310 - local
        return resp.read().decode()


def multiprocess_text(directory: Path) -> str:
    """The aggregate of a prometheus-client multiprocess directory, as the worker's /metrics renders it."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    return generate_latest(registry).decode()


def worker_metrics_dir(pid: int) -> Path:
    """Where the Celery worker main process `pid` keeps its children's samples (opsconsole.celery)."""
    import os

    from tests.support.workers import ROOT

    return Path(os.environ.get("OPSCONSOLE_DATA_DIR", ROOT / "data")) / "prometheus" / f"worker-{pid}"


def sample_sum(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total
