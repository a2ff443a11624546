"""Start and stop real Celery worker processes (and other engine subprocesses) for integration tests.

A worker is a `celery worker` subprocess on its own queue (so parallel test runs sharing one Redis
never steal each other's tasks), pointed at the test database the test process uses. `GroupProcess` is what
every such subprocess shares: the project's process harness (`reconcilers.authoring.processes`: its own process
group, its output in a log file, TERM-then-KILL on stop), run from the project root with its log in the data
folder.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

from django.db import connection

from reconcilers.authoring import processes as harness

ROOT = Path(__file__).resolve().parent.parent.parent


def test_database_url() -> str:
    """A DATABASE_URL naming the database the test process is connected to (the test database)."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgres://{auth}{s.get('HOST') or '127.0.0.1'}{port}/{s['NAME']}"


class GroupProcess(harness.GroupProcess):
    """A subprocess of a test (`reconcilers.authoring.processes.GroupProcess`), run from the project root, its
    output in `log_name` under the data folder (OPSCONSOLE_DATA_DIR, else data/)."""

    def __init__(self, log_name: str) -> None:
        log_path = Path(os.environ.get("OPSCONSOLE_DATA_DIR", ROOT / "data")) / log_name
        super().__init__(log_path.stem, log_path, cwd=ROOT)


class WorkerProcess(GroupProcess):
    """One `celery worker` subprocess (prefork by default) consuming one queue."""

    def __init__(
        self,
        queue: str,
        *,
        concurrency: int = 1,
        pool: str = "prefork",
        extra_env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        name = name or f"w{uuid.uuid4().hex[:6]}"
        super().__init__(f"worker-{name}.log")
        self.name = name
        self.queue = queue
        self.concurrency = concurrency
        self.pool = pool
        self.extra_env = extra_env or {}

    def env(self) -> dict[str, str]:
        """The worker's environment: the test's own plus the test database and the queue."""
        env = dict(os.environ)
        env["DATABASE_URL"] = test_database_url()
        env["OPSCONSOLE_CELERY_QUEUE"] = self.queue
        # Several workers run at once in the suite: no fixed metrics port, and no span writes competing for
        # the test database unless a test asks for them (the telemetry tests do).
        env.setdefault("OPSCONSOLE_WORKER_METRICS_PORT", "0")
        env.setdefault("OPSCONSOLE_TRACING", "off")
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        env.update(self.extra_env)
        return env

    def start(self) -> WorkerProcess:
        """Start the worker in its own process group."""
        cmd = harness.celery_worker_command(self.queue, self.name, concurrency=self.concurrency, pool=self.pool)
        self.spawn(cmd, self.env())
        return self

    def wait_ready(self, app: object, timeout: float = 60.0) -> None:
        """Block until the worker answers a ping task on its queue."""
        from opsconsole.tasks import ping

        deadline = time.monotonic() + timeout
        result = ping.apply_async(args=["ready"], queue=self.queue)
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early; log:\n{self.log()}")
            if result.ready():
                result.get(timeout=1)
                return
            time.sleep(0.1)
        raise TimeoutError(f"worker not ready in {timeout} s; log:\n{self.log()}")

    def children(self) -> list[int]:
        """The pids of the worker's pool processes."""
        if self.proc is None:
            return []
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]
