"""Start and stop real Celery worker processes (and other engine subprocesses) for integration tests.

A worker is a `celery worker` subprocess on its own queue (so parallel test runs sharing one Redis
never steal each other's tasks), pointed at the test database the test process uses. `GroupProcess` is what
every such subprocess shares: its own process group, its output in a log file, TERM-then-KILL on stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.db import connection

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


class GroupProcess:
    """A subprocess in its own process group, its output in `log_path` under the data folder."""

    log_tail = 8000  # characters of the log that log() returns

    def __init__(self, log_name: str) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(os.environ.get("OPSCONSOLE_DATA_DIR", ROOT / "data")) / log_name

    def spawn(self, cmd: list[str], env: dict[str, str]) -> None:
        """Start `cmd` from the project root in a new session, stdout and stderr into the log."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send sig to the whole process group."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a warm shutdown), then SIGKILL whatever is left after timeout."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def log(self) -> str:
        """The end of what the process printed so far."""
        try:
            return self.log_path.read_text(errors="replace")[-self.log_tail:]
        except OSError:
            return ""


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
        self.queue = queue
        self.concurrency = concurrency
        self.pool = pool
        self.name = name or f"w{uuid.uuid4().hex[:6]}"
        self.extra_env = extra_env or {}
        super().__init__(f"worker-{self.name}.log")

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
        cmd = [
            sys.executable, "-m", "celery", "-A", "opsconsole", "worker", "-l", "INFO",
            "-Q", self.queue, "-P", self.pool, "-c", str(self.concurrency), "-n", f"{self.name}@%h",
            "--without-mingle", "--without-gossip",
        ]
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
