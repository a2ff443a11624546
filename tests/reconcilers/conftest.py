"""Fixtures of the runner, kinds and integration tests: one kubesim per session (as a subprocess, with short
simulated pod delays) serving the CRDs of deploy/crds, the engine's ApiClient pointed at it, a fresh
namespace per test, a private workqueue per in-process runner test; and for the integration tests two real
Celery worker processes and a `runcontroller` process on that kubesim, the session's queue and the test
database (`integration`)."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis as redis_lib
from django.conf import settings as django_settings

from kubesim.testing import KubesimHandle, running_kubesim
from opsconsole.testing.cluster import CrdInstaller
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import apiclient, dispatch, kube, registry
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.kinds.tenant import TenantReconciler
from tests.reconcilers import testkinds
from tests.support.workers import GroupProcess, WorkerProcess, test_database_url

ROOT = Path(__file__).resolve().parents[2]
CRDS_DIR = ROOT / "deploy" / "crds"
SAMPLES_DIR = ROOT / "deploy" / "samples"
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
# short simulated pod lifecycle: Pending → bound → Running → Ready in ~0.1 s
POD_DELAYS = {"schedule_delay": 0.02, "start_delay": 0.04, "ready_delay": 0.04, "image_pull_backoff": 1.0,
              "image_pull_backoff_max": 30.0}


@contextmanager
def kubesim_with_crds() -> Iterator[KubesimHandle]:
    """kubesim as a subprocess (so the test process's GIL is not shared with it), with the CRDs of the built-in
    kinds and of the test-only Gadget generated from the kinds and served (the pytest plugin's installer, as a
    kind author's tests get them)."""
    # the whole session's changes fit its watch history: a late module's watches are not cut short by 410 Gone
    # (and re-listed) because earlier modules' Pods and Events filled kubesim's default 10,000 events
    with running_kubesim(mode="process", history_size=200_000, **POD_DELAYS) as handle:
        api = kube.build_api_client(handle.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler, TenantReconciler, testkinds.GadgetReconciler])
        api.close()
        yield handle


@pytest.fixture(scope="session")
def kubesim() -> Iterator[KubesimHandle]:
    """The session's kubesim (see kubesim_with_crds)."""
    with kubesim_with_crds() as handle:
        yield handle


def package_kubesim():  # noqa: ANN201 - a pytest fixture
    """A `kubesim` fixture for another test directory's conftest (`kubesim = package_kubesim()`): a kubesim
    (kubesim_with_crds) of that directory's own, started for its first test and stopped after its last.
    Re-exporting the session fixture instead registers a second session-scoped kubesim there, which lives (its
    kubelets busy) to the end of the session, and an engine on it would go on writing to the test database."""

    @pytest.fixture(scope="package", name="kubesim")
    def kubesim_of_package() -> Iterator[KubesimHandle]:
        with kubesim_with_crds() as handle:
            yield handle

    return kubesim_of_package


@pytest.fixture
def kapi(kubesim, settings) -> Iterator:
    """The engine's shared ApiClient (kube.get_api_client), configured from kubesim's kubeconfig."""
    settings.KUBECONFIG = kubesim.kubeconfig
    apiclient.reset()
    yield apiclient.get_api_client()
    apiclient.reset()


@pytest.fixture
def namespace(kapi) -> str:
    """A namespace of this test's own."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create_object(kapi, NAMESPACE, {"metadata": {"name": name}})
    return name


@pytest.fixture
def builtin_kinds_only(settings) -> Iterator:
    """Exactly the built-in kinds registered (no settings kinds, no installed entry points) for one test."""
    settings.OPSCONSOLE_RECONCILERS = []
    settings.OPSCONSOLE_BUILTIN_KINDS = True
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def reconcilers(settings) -> Iterator:
    """Register exactly these kinds for one test (built-in kinds off): `reconcilers(["dotted.Path", ...])`."""

    def use(paths: list[str]) -> None:
        settings.OPSCONSOLE_RECONCILERS = list(paths)
        settings.OPSCONSOLE_BUILTIN_KINDS = False
        registry.reset()

    yield use
    registry.reset()


class Sent:
    """The keys the runner dispatched (dispatch.dispatch replaced: no task reaches a broker)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, keys) -> int:
        keys = list(keys)
        self.keys.extend(keys)
        return len(keys)


@pytest.fixture
def workqueue(settings, monkeypatch, redis_client) -> Iterator:
    """A private workqueue (short lease) for in-process runner tests; dispatching only records the keys
    (`workqueue.sent.keys`)."""
    settings.OPSCONSOLE_WORKQUEUE_NAME = f"test-d-{uuid.uuid4().hex[:8]}"
    settings.OPSCONSOLE_WORKQUEUE_LEASE_SECONDS = 3.0
    # drained keys in this thread: the test's database transaction is invisible to other threads' connections
    settings.OPSCONSOLE_DRAIN_THREADS = 1
    settings.OPSCONSOLE_DRAIN_LINGER_SECONDS = 0  # a drain ends when no key waits (lingering: its own tests)
    sent = Sent()
    monkeypatch.setattr(dispatch, "dispatch", sent)
    queue = dispatch.get_queue()
    queue.sent = sent
    yield queue
    queue.clear()


# -- integration: real Celery workers and a controller process on the session kubesim -----------------------

INTEGRATION_RECONCILERS = [
    "reconcilers.kinds.memcached.MemcachedReconciler",
    "reconcilers.kinds.tenant.TenantReconciler",
    "tests.reconcilers.testkinds.GadgetReconciler",
]
LEASE_SECONDS = 3.0  # the workqueue lease: a killed worker's key is re-queued ~3 s later


class ControllerProcess(GroupProcess):
    """`manage.py runcontroller` as a subprocess (short leader-election durations), on the test database."""

    log_tail = 20000

    def __init__(self, queue: str, extra_env: dict[str, str]) -> None:
        self.queue = queue
        self.extra_env = extra_env
        super().__init__(f"controller-{queue}.log")

    def start(self) -> ControllerProcess:
        # As for workers: several controllers may run at once in the suite, so no fixed metrics port and no
        # span writes unless a test asks for them through extra_env.
        env = {**os.environ, "DATABASE_URL": test_database_url(), "OPSCONSOLE_CELERY_QUEUE": self.queue,
               "OPSCONSOLE_CONTROLLER_METRICS_PORT": "0", "OPSCONSOLE_TRACING": "off", **self.extra_env}
        cmd = [sys.executable, "manage.py", "runcontroller", "--lease-duration", "4", "--renew-deadline", "3",
               "--retry-period", "0.5"]
        self.spawn(cmd, env)
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until it says it runs (it then becomes leader at once: no other controller holds the Lease)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"controller exited early; log:\n{self.log()}")
            if "reconciling" in self.log():
                return
            time.sleep(0.1)
        raise TimeoutError(f"controller not ready in {timeout} s; log:\n{self.log()}")


class Engine:
    """The running engine of the integration tests: workers, the controller, their environment, the queue."""

    def __init__(self, queue_name: str, env: dict[str, str], kubesim) -> None:
        self.queue_name = queue_name
        self.env = env
        self.kubesim = kubesim
        self.workers: list[WorkerProcess] = []
        self.controller = ControllerProcess(queue_name, env)

    def start_worker(self, name: str, concurrency: int = 1) -> WorkerProcess:
        worker = WorkerProcess(self.queue_name, concurrency=concurrency, extra_env=self.env, name=name).start()
        self.workers.append(worker)
        return worker

    def wait_workers(self, timeout: float = 90.0) -> None:
        """Until every worker's pool child has answered a ping (pings go to the shared queue)."""
        from opsconsole.tasks import ping

        deadline = time.monotonic() + timeout
        answered: set[int] = set()
        while time.monotonic() < deadline:
            wanted = {pid for w in self.workers if w.proc and w.proc.poll() is None for pid in w.children()}
            if wanted and wanted <= answered:
                return
            for w in self.workers:
                if w.proc is not None and w.proc.poll() is not None:
                    raise RuntimeError(f"worker {w.name} exited early; log:\n{w.log()}")
            results = [ping.apply_async(args=["ready"], queue=self.queue_name) for _ in range(4)]
            for r in results:
                try:
                    answered.add(r.get(timeout=max(0.5, deadline - time.monotonic()))["pid"])
                except Exception:
                    pass
        raise TimeoutError("workers not ready: " + "; ".join(w.log()[-2000:] for w in self.workers))

    def replace(self, dead: WorkerProcess) -> WorkerProcess:
        """Stop what is left of a worker and start another in its place."""
        dead.stop()
        self.workers.remove(dead)
        worker = self.start_worker(f"{dead.name}r")
        self.wait_workers()
        return worker

    def workqueue(self):
        """The engine's workqueue (the same Redis keys the workers and the controller use)."""
        from reconcilers.engine.workqueue import WorkQueue

        return WorkQueue(redis_lib.Redis.from_url(django_settings.REDIS_URL), name=self.queue_name,
                         lease_seconds=LEASE_SECONDS)

    def worker_logs(self) -> str:
        return "\n".join(w.log_path.read_text(errors="replace") for w in self.workers if w.log_path.exists())

    def stop(self) -> None:
        self.controller.stop()
        for w in self.workers:
            w.stop()


@contextmanager
def engine_running(kubesim, django_db_blocker, *, prefix: str, extra_env: dict[str, str],
                   workers: tuple[int, ...] = (1, 1)) -> Iterator[Engine]:
    """Celery worker processes (prefork; by default two, one child each: `workers` gives each one's children)
    and a controller subprocess on the session kubesim, a Celery queue and workqueue of their own (so nothing else
    in the session feeds them or is fed by them), Redis (REDIS_URL) and the test database; `extra_env` adds to or
    overrides their environment."""
    queue_name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    env = {
        "KUBECONFIG": kubesim.kubeconfig,
        "OPSCONSOLE_RECONCILERS": ",".join(INTEGRATION_RECONCILERS),
        "OPSCONSOLE_WORKQUEUE_LEASE_SECONDS": str(LEASE_SECONDS),
        "OPSCONSOLE_RESYNC_SECONDS": "3600",
        "OPSCONSOLE_LEADER_NAMESPACE": "default",
        # a task lost with a SIGKILLed worker before it claimed its key is re-sent after this (prod: 300 s)
        "OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER": "10",
        **extra_env,
    }
    running = Engine(queue_name, env, kubesim)
    with django_db_blocker.unblock():
        running.controller.start()
        for i, concurrency in enumerate(workers):
            running.start_worker(f"{queue_name[-8:]}-{i}", concurrency)
        try:
            running.controller.wait_ready()
            running.wait_workers()
        except BaseException:
            running.stop()
            raise
    try:
        yield running
    finally:
        running.stop()
        running.workqueue().clear()


@pytest.fixture(scope="module")
def engine(request, kubesim, redis_client, django_db_setup, django_db_blocker) -> Iterator[Engine]:
    """The engine (`engine_running`) of one integration module, stopped at the end of the module. A module may
    set `ENGINE_EXTRA_ENV` (a dict) to change the processes' environment, e.g. turn tracing on."""
    extra = getattr(request.module, "ENGINE_EXTRA_ENV", {})
    with engine_running(kubesim, django_db_blocker, prefix="test-d-engine", extra_env=extra) as running:
        yield running


def wait_idle(queue, timeout: float = 30.0, quiet: float = 0.5) -> None:
    """Until the workqueue has nothing pending, processing or due within a second, for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    since = None
    while time.monotonic() < deadline:
        snap = queue.snapshot()
        due_soon = [d for d in snap.backing_off if d.next_retry - snap.now < 1.0]
        if snap.depth == 0 and snap.processing_count == 0 and not due_soon:
            since = since or time.monotonic()
            if time.monotonic() - since >= quiet:
                return
        else:
            since = None
        time.sleep(0.1)
    raise AssertionError(f"workqueue not idle after {timeout} s: {queue.snapshot()}")


@pytest.fixture
def integration(engine, transactional_db, kapi, settings) -> Iterator[Engine]:
    """What an integration test uses: the running engine, the database its processes commit to, the ApiClient
    on kubesim. Afterwards it waits until the engine is idle, so that the database is emptied (the
    transactional_db teardown) while nothing writes to it."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    settings.OPSCONSOLE_WORKQUEUE_NAME = engine.queue_name  # dispatch.get_queue() here is the engine's
    registry.reset()
    yield engine
    wait_idle(dispatch.get_queue(), timeout=60)
    audit_intact()
    registry.reset()


def audit_intact() -> None:
    """`manage.py audit_verify` passes on what the test left in the database."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("audit_verify", stdout=out)
    assert "audit trail intact" in out.getvalue(), out.getvalue()
