"""The database taken away from the engine and the web for a few seconds while CRs converge: runs fail and are retried
with backoff (the workers' metrics count the failures and the retries: the database cannot hold a run it could not
write), nothing is half written (each transition once and with its run, every resource row's head the last link of
its chain, the phase the cluster shows the one recorded), the web answers 503 on /readyz while the database is away
and 200 once it is back, no process exits, and every CR converges afterwards; the audit chains verify.

PostgreSQL: the engine and the web connect through a TCP proxy that the test cuts (connections reset, new
ones refused) and restores; the shared server is never touched. SQLite: the database file is moved aside
(tests/support/db_outage.py). Everything runs on an isolated engine (tests/faults/isolated.py)."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.models import ReconcileRun, Resource, Transition
from tests.faults.conftest import all_recorded, create_gadgets, phases
from tests.faults.isolated import Isolated, isolated_engine
from tests.fixtures.engines import audit_intact
from tests.reconcilers.testkinds import GADGET
from tests.support.db_outage import DatabaseOutage
from tests.support.metrics_read import free_port, multiprocess_text, sample_sum, worker_metrics_dir
from tests.support.workers import ROOT, GroupProcess

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CRS = 16
DOWN_SECONDS = 4.0


class WebProcess(GroupProcess):
    """gunicorn serving the project (one sync worker) on a free port."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(f"web-{env['OPSCONSOLE_CELERY_QUEUE']}.log")
        self.port = free_port()
        self.env = env

    def start(self) -> WebProcess:
        cmd = [sys.executable, "-m", "gunicorn", "opsconsole.wsgi:application", "-b", f"127.0.0.1:{self.port}",
               "-w", "1", "--timeout", "30"]
        self.spawn(cmd, self.env)
        return self

    def readyz(self) -> tuple[int, dict]:
        """/readyz: (status, body)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=10) as resp:  # noqa: S310
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@pytest.fixture
def outage(transactional_db, settings, django_db_blocker) -> Iterator[tuple[Isolated, DatabaseOutage, WebProcess]]:
    """An isolated engine and a web process on the database as DatabaseOutage serves it."""
    db = DatabaseOutage()
    try:
        with isolated_engine(django_db_blocker, settings, prefix="test-faults-db",
                             extra_env={"DATABASE_URL": db.engine_url}) as isolated:
            env = {**os.environ, **isolated.engine.env, "DATABASE_URL": db.engine_url,
                   "OPSCONSOLE_CELERY_QUEUE": isolated.engine.queue_name, "OPSCONSOLE_TRACING": "off",
                   "PYTHONPATH": str(ROOT)}
            env.pop("PROMETHEUS_MULTIPROC_DIR", None)
            web = WebProcess(env).start()
            try:
                wait_for(lambda: _answers(web), timeout=60, interval=0.2)
                yield isolated, db, web
            finally:
                db.close()
                web.stop()
    finally:
        db.close()
    audit_intact()


def _answers(web: WebProcess) -> bool:
    if web.proc is not None and web.proc.poll() is not None:
        raise RuntimeError(f"the web exited: {web.log()}")
    try:
        return web.readyz()[0] in (200, 503)
    except OSError:
        return False


def _worker_metric(isolated: Isolated, name: str, **labels: str) -> float:
    return sum(sample_sum(multiprocess_text(worker_metrics_dir(w.proc.pid)), name, **labels)
               for w in isolated.engine.workers)


def test_the_database_away_for_a_while_runs_retry_nothing_is_half_written_readyz_fails_then_recovers(
        outage) -> None:
    isolated, db, web = outage
    kapi, namespace = isolated.api, isolated.namespace
    status, body = web.readyz()
    assert status == 200 and body["checks"]["database"]["ok"], body
    errors_before = _worker_metric(isolated, "controller_runtime_reconcile_errors_total", controller="gadget")
    retries_before = _worker_metric(isolated, "workqueue_retries_total", controller="gadget")

    uids = create_gadgets(kapi, namespace, CRS, "db", mode="slow", sleepSeconds=0.2)
    wait_for(lambda: Resource.objects.filter(uid__in=uids.values(), phase="Running").count() >= 2, timeout=30,
             interval=0.05)
    db.cut()
    cut_at = time.monotonic()
    down_status, down_body = wait_for(lambda: (r := web.readyz())[0] == 503 and r, timeout=10, interval=0.2)
    time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - cut_at)))
    errors_during = _worker_metric(isolated, "controller_runtime_reconcile_errors_total", controller="gadget")
    db.restore()
    restored = time.monotonic()

    up = wait_for(lambda: (r := web.readyz())[0] == 200 and r, timeout=30, interval=0.2)
    ready_after = time.monotonic() - restored
    wait_for(lambda: all_recorded(uids, "Running"), timeout=90, interval=0.2)
    converged = time.monotonic() - restored

    assert not down_body["ready"] and not down_body["checks"]["database"]["ok"], down_body
    assert up[1]["checks"]["database"]["ok"]
    failed = errors_during - errors_before
    assert failed > 0  # runs met the outage: they failed (and, below, were retried)
    assert _worker_metric(isolated, "workqueue_retries_total", controller="gadget") - retries_before >= failed
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    runs = ReconcileRun.objects.filter(key__contains=f"/{namespace}/")
    assert runs.filter(result="success").values("key").distinct().count() == CRS
    transitions = Transition.objects.filter(namespace=namespace)
    assert transitions.count() == 2 * CRS and not transitions.filter(run__isnull=True).exists()  # each with its run
    for resource in Resource.objects.filter(uid__in=uids.values()):  # the row's head is its chain's last link
        last = transitions.filter(resource_uid=resource.uid).order_by("-seq").first()
        assert (resource.phase, resource.last_transition_seq, resource.last_transition_hash) == (
            last.to_phase, last.seq, last.hash), resource.name
        live = kube.get_object(kapi, GADGET, namespace, resource.name)
        assert live["status"]["phase"] == resource.phase  # what the cluster shows is what was recorded
    exits = isolated.exit_codes()
    assert all(code is None for code in exits.values()), exits
    assert web.proc is not None and web.proc.poll() is None
    print(f"\nFAULT database-outage ({db.vendor}): {CRS} CRs, the database away {DOWN_SECONDS:.0f} s mid-run; "
          f"/readyz 503 while away, 200 {ready_after:.1f} s after it came back; {failed:.0f} runs failed meanwhile "
          f"and were retried; all Running {converged:.1f} s after it came back; {runs.count()} runs recorded, "
          f"{transitions.count()} transitions, none without its run")
