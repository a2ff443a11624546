"""The whole engine for integration tests: a `runcontroller` and one Celery worker as subprocesses on the sandbox
cluster, running the kinds under test. Slow to start (about 5-10 s), so the `opsconsole_engine` fixture that
uses it is opt-in.

The processes get the test process's environment plus:
- `DJANGO_SETTINGS_MODULE=opsconsole.settings`, `KUBECONFIG` = the cluster's kubeconfig (kubesim listens on a
  TCP port of 127.0.0.1, so a thread-mode kubesim in the test process serves them too);
- `OPSCONSOLE_RECONCILERS` = the kinds' dotted paths (built-in kinds and entry points off, so exactly these run);
- a private Celery queue and workqueue (`OPSCONSOLE_CELERY_QUEUE`, `OPSCONSOLE_WORKQUEUE_NAME`), so that nothing
  else sharing the Redis (`REDIS_URL`, default redis://127.0.0.1:6379/0) feeds them or is fed by them;
- `DATABASE_URL` from the environment when set, else a SQLite file in a temporary folder; either is migrated
  first (`migrate` is a no-op on an up-to-date database);
- `PYTHONPATH` = the test process's own import path entries, so kinds defined in test modules import there.

Nothing here imports Django in the test process: the engine is driven through the Kubernetes API only.
`wait_for_phase` polls the live object's `status.phase`; `history` reads what the engine recorded about an object
(its transitions and healing records, e.g. `rollback.succeeded`) through a subprocess on the engine's database
(`reconcilers.authoring.testing.history`). The controller runs the healing step every 0.5 s.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reconcilers.authoring.processes import SHORT_LEADER_ELECTION, GroupProcess, celery_worker_command
from reconcilers.authoring.testing.kinds import dotted_path, find_kind
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.engine import kube

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
SETTINGS = "opsconsole.settings"


def _import_path() -> str:
    """The test process's import path entries that a fresh interpreter lacks (the rootdir, test folders,
    the current directory), as a PYTHONPATH."""
    standard = {os.path.realpath(p) for p in sysconfig.get_paths().values()}
    entries = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if os.path.isdir(path) and path not in standard and "site-packages" not in path \
                and not path.startswith(os.path.realpath(sys.base_prefix)) and path not in entries:
            entries.append(path)
    extra = os.environ.get("PYTHONPATH")
    return os.pathsep.join(entries + ([extra] if extra else []))


class EngineProcess(GroupProcess):
    """One of the engine's subprocesses (`reconcilers.authoring.processes.GroupProcess`): TERM, then KILL after
    15 s, on stop."""

    log_tail = 6000
    stop_timeout = 15.0

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> None:
        super().__init__(name, log_path, command=cmd, environment=env, cwd=cwd)


class Engine:
    """A running controller and worker for `kinds` on the cluster of `kubeconfig` (see the module docstring)."""

    def __init__(self, kinds: Sequence[type[Reconciler]], kubeconfig: str, api: Any, *, cwd: Path | None = None,
                 extra_env: dict[str, str] | None = None) -> None:
        self.kinds = list(kinds)
        self.api = api
        self.kubeconfig = kubeconfig
        self.queue_name = f"opsconsole-test-{uuid.uuid4().hex[:8]}"
        self._tmp = tempfile.TemporaryDirectory(prefix="opsconsole-engine-")
        self.dir = Path(self._tmp.name)
        self.cwd = cwd or Path.cwd()
        self.redis_url = os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
        self.database_url = os.environ.get("DATABASE_URL") or f"sqlite:///{self.dir / 'opsconsole.sqlite3'}"
        env = dict(os.environ)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        env.update({
            "DJANGO_SETTINGS_MODULE": SETTINGS,
            "KUBECONFIG": kubeconfig,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "OPSCONSOLE_DATA_DIR": str(self.dir),
            "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(32),
            "OPSCONSOLE_RECONCILERS": ",".join(dotted_path(cls) for cls in self.kinds),
            "OPSCONSOLE_BUILTIN_KINDS": "false",
            "OPSCONSOLE_KIND_ENTRY_POINTS": "false",
            "OPSCONSOLE_CELERY_QUEUE": self.queue_name,
            "OPSCONSOLE_WORKQUEUE_NAME": self.queue_name,
            "OPSCONSOLE_WORKQUEUE_LEASE_SECONDS": "5",
            "OPSCONSOLE_RESYNC_SECONDS": "3600",
            "OPSCONSOLE_LEADER_NAMESPACE": "default",
            "OPSCONSOLE_WORKER_METRICS_PORT": "0",
            "OPSCONSOLE_CONTROLLER_METRICS_PORT": "0",
            "OPSCONSOLE_TRACING": "off",
            # the healing step (anomaly rules, automatic rollback) every half second instead of every 2 s
            "OPSCONSOLE_HEALING_INTERVAL": "0.5",
            "PYTHONPATH": _import_path(),
            "PYTHONUNBUFFERED": "1",
        })
        env.update(extra_env or {})
        self.env = env
        py = sys.executable
        self.worker = EngineProcess(
            "worker",
            celery_worker_command(self.queue_name, self.queue_name, heartbeat=False), env, self.cwd,
            self.dir / "worker.log")
        self.controller = EngineProcess(
            "controller",
            # the session's kubesim is a cluster started afresh: its identity is adopted as the default cluster's,
            # where a database kept from an earlier session recorded another's
            [py, "-m", "django", "runcontroller", "--adopt-identity", *SHORT_LEADER_ELECTION], env, self.cwd,
            self.dir / "controller.log")
        self.started_in: float | None = None

    def start(self, timeout: float = 60.0) -> Engine:
        """Migrate the database while the worker starts, then start the controller; until both are ready."""
        started = time.perf_counter()
        try:
            self.worker.start()
            migrate = EngineProcess("migrate", [sys.executable, "-m", "django", "migrate", "--noinput"], self.env,
                                    self.cwd, self.dir / "migrate.log").start()
            assert migrate.proc is not None
            try:
                code = migrate.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                migrate.stop()
                raise TimeoutError(f"migrate did not finish within {timeout:g} s; log:\n{migrate.log()}") from None
            if code != 0:
                raise RuntimeError(f"migrate failed (code {code}); log:\n{migrate.log()}")
            self.controller.start()
            self.worker.wait_for_line(" ready.", timeout)
            self.controller.wait_for_line(" reconciling ", timeout)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.perf_counter() - started
        return self

    def stop(self) -> None:
        """Stop the controller and the worker; drop the private queue's keys from Redis; remove the folder."""
        self.controller.stop()
        self.worker.stop()
        self._clear_redis()
        self._tmp.cleanup()

    def _clear_redis(self) -> None:
        try:
            import redis

            client = redis.Redis.from_url(self.redis_url)
            keys = list(client.scan_iter(match=f"wq:{{{self.queue_name}}}:*"))
            keys += [self.queue_name, f"_kombu.binding.{self.queue_name}"]
            client.delete(*keys)
            client.close()
        except Exception:  # noqa: BLE001 - a tidy-up must not fail the test
            pass

    def logs(self) -> str:
        """The end of the controller's and the worker's logs."""
        return f"--- controller ---\n{self.controller.log()}\n--- worker ---\n{self.worker.log()}"

    def _resource(self, kind: str | type[Reconciler] | ResourceKind, api_version: str | None = None) -> ResourceKind:
        if isinstance(kind, ResourceKind):
            return kind
        if isinstance(kind, type):
            return kind.resource
        if api_version:
            return find_kind(self.kinds, api_version, kind).resource
        for cls in self.kinds:
            if kind in (cls.resource.kind, cls.resource.plural):
                return cls.resource
        return find_kind(self.kinds, "", kind).resource  # raises, naming the kinds under test

    def _locate(self, target: dict[str, Any] | tuple[str, str, str | type[Reconciler] | ResourceKind]
                ) -> tuple[ResourceKind, str, str]:
        """(its ResourceKind, namespace, name) of an object or a `(namespace, name, kind)` tuple."""
        if isinstance(target, dict):
            meta = target.get("metadata") or {}
            resource = self._resource(str(target.get("kind")), str(target.get("apiVersion")))
            return resource, meta.get("namespace") or "", meta["name"]
        namespace, name, kind = target
        return self._resource(kind), namespace, name

    def wait_for_phase(
        self,
        target: dict[str, Any] | tuple[str, str, str | type[Reconciler] | ResourceKind],
        phase: str,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """Poll the live object until its `status.phase` is `phase`; the object. `target` is an object (its
        apiVersion, kind, namespace and name) or `(namespace, name, kind)` with kind a Kind name, a Reconciler
        class or a ResourceKind. AssertionError with the last status and the processes' logs otherwise."""
        resource, namespace, name = self._locate(target)
        deadline = time.monotonic() + timeout
        live: dict[str, Any] | None = None
        while True:
            live = kube.get_object(self.api, resource, namespace or None if resource.namespaced else None, name)
            status = (live or {}).get("status") or {}
            if status.get("phase") == phase:
                assert live is not None
                return live
            for proc in (self.controller, self.worker):
                if not proc.running():
                    raise AssertionError(f"the engine's {proc.name} exited; {self.logs()}")
            if time.monotonic() >= deadline:
                where = f"{namespace}/{name}" if namespace else name
                seen = "not found" if live is None else (f"phase {status.get('phase')!r}, reason "
                                                         f"{status.get('reason')!r}, message {status.get('message')!r}")
                raise AssertionError(f"{resource.kind} {where} did not reach phase {phase!r} within {timeout:g} s "
                                     f"({seen})\n{self.logs()}")
            time.sleep(0.1)

    def history(self, target: dict[str, Any] | tuple[str, str, str | type[Reconciler] | ResourceKind], *,
                wait_for: str = "", timeout: float = 30.0) -> dict[str, list[dict[str, Any]]]:
        """What the engine recorded about the object (`target` as for `wait_for_phase`): `{"transitions": [...],
        "healing": [...]}`, each a dict (from_phase, to_phase, reason, generation, actor; action, rule, actor,
        reason, generation, target_generation). With `wait_for` (a healing action such as `rollback.succeeded`),
        read once that action is on record; AssertionError with the history and the logs when it is not within
        `timeout`."""
        import json

        resource, namespace, name = self._locate(target)
        live = kube.get_object(self.api, resource, namespace or None if resource.namespaced else None, name)
        if live is None:
            raise AssertionError(f"{resource.kind} {namespace}/{name} not found")
        cmd = [sys.executable, "-m", "reconcilers.authoring.testing.history", live["metadata"]["uid"],
               "--timeout", str(timeout)]
        if wait_for:
            cmd += ["--wait-for", wait_for]
        proc = subprocess.run(cmd, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout + 60)
        if proc.returncode != 0:
            raise RuntimeError(f"reading the history failed (code {proc.returncode}):\n{proc.stdout}{proc.stderr}")
        history: dict[str, list[dict[str, Any]]] = json.loads(proc.stdout.strip().splitlines()[-1])
        if wait_for and not any(h["action"] == wait_for for h in history["healing"]):
            raise AssertionError(f"no {wait_for} recorded for {resource.kind} {namespace}/{name} within {timeout:g} s; "
                                 f"history: {history}\n{self.logs()}")
        return history
