"""Fixtures of the telemetry tests: one Celery worker (prefork, two children) with tracing and /metrics on,
on a private queue and workqueue, for the module; a controller process serving /metrics, started when a test
first needs it (the trace test runs without one, so no informer enqueue races the API's); a real Prometheus
(Debian's /usr/bin/prometheus) scraping both every second. A kubesim of this directory's own (its engine sees
only this module's objects); the ApiClient and namespaces come from the root fixture plugin (tests/fixtures)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconcilers.engine import registry
from tests.fixtures.cluster import package_kubesim
from tests.fixtures.engines import ControllerProcess, wait_idle
from tests.support.workers import WorkerProcess

kubesim = package_kubesim()  # a kubesim of this directory's own

RECONCILERS = ["tests.reconcilers.testkinds.GadgetReconciler"]
PROMETHEUS = "/usr/bin/prometheus"


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, path: str = "/metrics") -> str:
    """The text of one /metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:  # noqa: S310 - local
        return resp.read().decode()


class Telemetry:
    """The module's running processes and where they listen."""

    def __init__(self, sim) -> None:
        self.queue = f"test-obs-{uuid.uuid4().hex[:8]}"
        self.worker_port = free_port()
        self.controller_port = free_port()
        self.env = {
            "KUBECONFIG": sim.kubeconfig,
            "OPSCONSOLE_RECONCILERS": ",".join(RECONCILERS),
            "OPSCONSOLE_BUILTIN_KINDS": "0",
            "OPSCONSOLE_WORKQUEUE_NAME": self.queue,
            "OPSCONSOLE_WORKQUEUE_LEASE_SECONDS": "3",
            "OPSCONSOLE_RESYNC_SECONDS": "3600",
            "OPSCONSOLE_TRACING": "on",
            "OPSCONSOLE_WORKER_METRICS_PORT": str(self.worker_port),
            "OPSCONSOLE_CONTROLLER_METRICS_PORT": str(self.controller_port),
            "OPSCONSOLE_METRICS_ADDR": "127.0.0.1",
        }
        self.worker = WorkerProcess(self.queue, concurrency=2, extra_env=self.env, name=self.queue[-8:])
        self.controller: ControllerProcess | None = None

    def controller_start(self) -> ControllerProcess:
        if self.controller is None:
            self.controller = ControllerProcess(self.queue, self.env).start()
            self.controller.wait_ready()
        return self.controller

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        self.worker.stop()


@pytest.fixture(scope="module")
def telemetry(kubesim, redis_client, django_db_setup, django_db_blocker) -> Iterator[Telemetry]:
    """The worker (and, on demand, the controller) of this module, Celery tasks of the test process sent to
    their queue."""
    from opsconsole.celery import app

    running = Telemetry(kubesim)
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = running.queue
    with django_db_blocker.unblock():
        running.worker.start()
        try:
            running.worker.wait_ready(app, timeout=90)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(running.worker.children()) < 2:
                time.sleep(0.1)
        except BaseException:
            running.stop()
            raise
    try:
        yield running
    finally:
        running.stop()
        app.conf.task_default_queue = previous


@pytest.fixture
def engine(telemetry, transactional_db, kapi, settings) -> Iterator[Telemetry]:
    """What a test uses: the running processes, the database they commit to, this process pointed at the
    same workqueue and reconcilers. Afterwards, waits until the queue is idle (before the database is
    emptied)."""
    from reconcilers.engine import dispatch

    settings.OPSCONSOLE_RECONCILERS = RECONCILERS
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_WORKQUEUE_NAME = telemetry.queue
    registry.reset()
    yield telemetry
    wait_idle(dispatch.get_queue(), timeout=60)
    registry.reset()


class Prometheus:
    """A Prometheus server on a free port, its TSDB in a temp dir, scraping `targets` every `interval` (a
    Prometheus duration; 1s unless given)."""

    def __init__(self, tmp: Path, targets: dict[str, int], interval: str = "1s") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        jobs = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
            for job, port in targets.items()
        )
        config = tmp / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
                          f"scrape_configs:\n{jobs}")
        self.log_path = tmp / "prometheus.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self._log, stderr=subprocess.STDOUT,
        )

    def wait_up(self, jobs: list[str], timeout: float = 30.0) -> None:
        """Until every job's target has been scraped successfully."""
        from prometheus_api_client import PrometheusConnect

        client = PrometheusConnect(self.url, disable_ssl=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_path.read_text(errors='replace')[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()  # listening yet?
            except OSError:
                time.sleep(0.1)
                continue
            try:
                up = {r["metric"]["job"]: r["value"][1] for r in client.custom_query("up")}
                if all(up.get(job) == "1" for job in jobs):
                    return
            except Exception:  # noqa: S110 - not listening yet
                pass
            time.sleep(0.2)
        raise TimeoutError(f"targets not up: {self.log_path.read_text(errors='replace')[-3000:]}")

    def last_scrape(self, job: str) -> float:
        """The time of the job's latest scrape (0 when none)."""
        from prometheus_api_client import PrometheusConnect

        result = PrometheusConnect(self.url, disable_ssl=True).custom_query(f'timestamp(up{{job="{job}"}})')
        return float(result[0]["value"][1]) if result else 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
