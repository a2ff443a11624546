"""Every background thread supervised (issue 37): a thread that dies (its target raises, or returns without being
asked to stop) is reported down (the controller's /healthz answers 503) while it waits its backoff, then started
again and counted in opsconsole_thread_restarts_total{thread}; a thread stopped on purpose is neither. The lease
renewals and the controller's background steps, killed the way they could die, come back."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client import REGISTRY

from kubesim.testing import wait_for
from opsconsole.telemetry.health import metrics_health_server_start
from reconcilers.engine import lease_renewal, supervise
from reconcilers.engine.controller.background import BackgroundStep
from reconcilers.engine.lease_renewal import LeaseRenewer


def restarts(thread: str) -> float:
    return REGISTRY.get_sample_value("opsconsole_thread_restarts_total", {"thread": thread}) or 0.0


class Gate:
    """A backoff the test holds open: the thread waits in it (down) until the test lets it go."""

    def __init__(self) -> None:
        self.entered, self.opened = threading.Event(), threading.Event()

    def __call__(self, delay: float) -> None:
        self.entered.set()
        self.opened.wait(30)


@pytest.fixture
def healthz():
    server = metrics_health_server_start(0, "127.0.0.1")
    url = f"http://127.0.0.1:{server.server_address[1]}"

    def get(path: str = "/healthz") -> tuple[int, dict | str]:
        try:
            with urllib.request.urlopen(url + path, timeout=10) as answer:
                data = answer.read().decode()
                return answer.status, json.loads(data) if path == "/healthz" else data
        except urllib.error.HTTPError as failed:
            return failed.code, json.loads(failed.read().decode())

    yield get
    server.shutdown()


def test_a_thread_whose_target_raises_is_down_on_healthz_then_restarted_and_counted(healthz):
    gate, second = Gate(), threading.Event()
    runs: list[int] = []
    before = restarts("test-raises")

    def target() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("the database went away")
        second.set()
        thread.stopping.wait()

    thread = supervise.Supervised("test-raises", target, pause=gate)
    thread.start()
    try:
        assert gate.entered.wait(10)  # died, waiting to be started again
        assert supervise.threads()["test-raises"] is False and not supervise.healthy()
        status, body = healthz()
        assert status == 503 and body["status"] == "unhealthy" and "test-raises" in body["down"]
        assert restarts("test-raises") == before
        gate.opened.set()
        assert second.wait(10)
        assert supervise.threads()["test-raises"] is True and thread.restarts == 1
        assert restarts("test-raises") == before + 1
        status, body = healthz()
        assert status == 200 and body["threads"]["test-raises"] is True
        status, metrics = healthz("/metrics")
        assert status == 200 and 'opsconsole_thread_restarts_total{thread="test-raises"}' in metrics
    finally:
        gate.opened.set()
        thread.stop()
    assert "test-raises" not in supervise.threads() and not thread.is_alive()


def test_a_thread_whose_target_returns_on_its_own_is_restarted():
    second = threading.Event()
    runs: list[int] = []

    def target() -> None:
        runs.append(1)
        if len(runs) > 1:
            second.set()
            thread.stopping.wait()

    thread = supervise.Supervised("test-returns", target, min_backoff=0.01)
    thread.start()
    try:
        assert second.wait(10) and thread.restarts == 1
    finally:
        thread.stop()


def test_a_thread_stopped_on_purpose_is_neither_down_nor_restarted():
    started = threading.Event()
    before = restarts("test-stopped")

    def target() -> None:
        started.set()
        thread.stopping.wait()

    thread = supervise.Supervised("test-stopped", target)
    thread.start()
    assert started.wait(10) and supervise.threads()["test-stopped"] is True
    thread.stop()
    assert not thread.is_alive() and "test-stopped" not in supervise.threads()
    assert restarts("test-stopped") == before and thread.restarts == 0


def test_a_supervised_thread_whose_os_thread_is_gone_is_started_again_when_health_is_asked():
    runs: list[int] = []
    second = threading.Event()

    def target() -> None:
        runs.append(1)
        if len(runs) > 1:
            second.set()
        thread.stopping.wait()

    thread = supervise.Supervised("test-gone", target)
    thread.start()
    wait_for(lambda: runs, timeout=10)
    thread._thread = threading.Thread(target=lambda: None)  # as if its OS thread had vanished
    thread._thread.start()
    thread._thread.join()
    try:
        assert "test-gone" in supervise.revive() and second.wait(10)
        assert supervise.threads()["test-gone"] is True
    finally:
        thread.stop()


class FakeQueue:
    def __init__(self) -> None:
        self.lease_seconds = 0.3
        self.renewed: list[str] = []

    def renew(self, key: str, owner: str) -> bool:
        self.renewed.append(key)
        return True


def test_the_lease_renewal_thread_killed_is_restarted_counted_and_renews_again(monkeypatch):
    real_due = lease_renewal._RENEWALS._due
    killed = threading.Event()

    def due_once_broken():
        if not killed.is_set():
            killed.set()
            raise RuntimeError("a bug in the renewal loop")
        return real_due()

    monkeypatch.setattr(lease_renewal._RENEWALS, "_due", due_once_broken)
    before = restarts(lease_renewal.THREAD_NAME)
    queue = FakeQueue()
    lease = LeaseRenewer(queue, "k", "w1")
    lease.start()  # wakes the renewal thread (started now or by an earlier test), which dies on its next look
    try:
        assert killed.wait(10)
        wait_for(lambda: len(queue.renewed) >= 2, timeout=10)  # renewed again after the restart
        assert restarts(lease_renewal.THREAD_NAME) >= before + 1 and not lease.lost
        assert supervise.threads()[lease_renewal.THREAD_NAME] is True
    finally:
        lease.stop()


def test_the_archive_step_thread_killed_by_the_database_is_down_then_restarted(monkeypatch, healthz):
    import django.db

    real_close = django.db.close_old_connections
    broken, steps, gate = threading.Event(), threading.Event(), Gate()

    def close_old_connections() -> None:
        if not broken.is_set():  # outside the step's try: this ended the archive thread for good before
            broken.set()
            raise django.db.OperationalError("server closed the connection unexpectedly")
        real_close()

    monkeypatch.setattr(django.db, "close_old_connections", close_old_connections)
    before = restarts("controller-archive")
    thread = BackgroundStep("archive", lambda: steps.set() or False, idle=0.01, pause=gate).start()
    try:
        assert gate.entered.wait(10) and not steps.is_set()
        status, body = healthz()
        assert status == 503 and "controller-archive" in body["down"]
        gate.opened.set()
        assert steps.wait(10) and thread.up
        assert restarts("controller-archive") == before + 1
        assert healthz()[0] == 200
    finally:
        gate.opened.set()
        thread.stop()
    assert not thread.is_alive()


def test_the_controllers_liveness_probe_asks_its_healthz():
    from pathlib import Path

    import yaml

    manifest = Path(__file__).resolve().parents[3] / "deploy" / "kustomize" / "base" / "controller.yaml"
    (deployment,) = [d for d in yaml.safe_load_all(manifest.read_text()) if d and d.get("kind") == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
