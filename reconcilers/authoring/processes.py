"""The project's one subprocess harness: a process in its own session (so it and its children are signalled as a
group), its output in a log file, stopped with SIGTERM and then SIGKILL after a grace period.

Three users share it: the pytest plugin's engine (`reconcilers.authoring.testing.engine`: a controller and a
Celery worker for a kind author's tests), the project's tests (`tests/support/workers.py`: workers, controllers
and web processes on the test database) and the benchmarks (`bench/converge/procs.py`: kubesim, the operator
under test, with CPU and memory read from /proc). Each adds its own commands and readiness checks; the command
lines they have in common are built here too (`celery_worker_command`, `SHORT_LEADER_ELECTION`).

No Django here: the plugin imports it into test processes that have none.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Self

#: `runcontroller` options for tests: the leader Lease expires after 4 s and is retried every 0.5 s, so a
#: replacement controller takes over quickly
SHORT_LEADER_ELECTION = ["--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5"]


def celery_worker_command(queue: str, name: str, *, concurrency: int = 1, pool: str = "prefork",
                          loglevel: str = "INFO", heartbeat: bool = True) -> list[str]:
    """`celery -A opsconsole worker` consuming only `queue`, as node `<name>@%h`, with no mingle or gossip
    (and no heartbeat when `heartbeat` is false): the workers of a test or a benchmark talk to nobody else."""
    cmd = [sys.executable, "-m", "celery", "-A", "opsconsole", "worker", "-l", loglevel, "-Q", queue, "-P", pool,
           "-c", str(concurrency), "-n", f"{name}@%h", "--without-mingle", "--without-gossip"]
    return cmd if heartbeat else [*cmd, "--without-heartbeat"]


class GroupProcess:
    """One subprocess in a new session, its stdout and stderr in `log_path`; `command` and `environment` are what
    `start()` runs (`spawn` runs any other), from `cwd` (default: the current directory)."""

    log_tail = 8000  # characters of the log that log() returns by default
    stop_timeout = 20.0  # seconds stop() waits after SIGTERM before SIGKILL
    term_group = True  # stop() sends SIGTERM to the whole group (False: to the process only)

    def __init__(self, name: str, log_path: Path, *, command: list[str] | None = None,
                 environment: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.log_path = log_path
        self.command = command or []
        self.environment = environment
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, cmd: list[str], env: dict[str, str] | None, *, stdout: int | IO[bytes] | None = None) -> None:
        """Start `cmd` in a new session, stderr (and stdout, unless `stdout` names another target) into the log
        file, which is created (or emptied) first."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(cmd, cwd=self.cwd, env=env, stdout=log if stdout is None else stdout,
                                         stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def start(self, stdout: int | IO[bytes] | None = None) -> Self:
        """Start `command` with `environment` (see `spawn`)."""
        self.spawn(self.command, self.environment, stdout=stdout)
        return self

    @property
    def pid(self) -> int:
        """The process's pid (also its process group's id)."""
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    def running(self) -> bool:
        """Whether it was started and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the whole process group (when it is still running)."""
        if self.running():
            os.killpg(self.pid, sig)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM (a warm shutdown; to the group, or to the process when `term_group` is false), then SIGKILL to
        the whole group when it has not exited after `timeout` (default `stop_timeout`) seconds."""
        if not self.running():
            return
        assert self.proc is not None
        try:
            if self.term_group:
                os.killpg(self.proc.pid, signal.SIGTERM)
            else:
                self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(self.stop_timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # still alive, so the group is certainly ours
            except ProcessLookupError:
                pass
            self.proc.wait(5)
        except ProcessLookupError:
            pass

    def log(self, tail: int | None = None) -> str:
        """The last `tail` (default `log_tail`) characters of what it printed so far."""
        try:
            return self.log_path.read_text(errors="replace")[-(self.log_tail if tail is None else tail):]
        except OSError:
            return ""

    def wait_for_line(self, text: str, timeout: float) -> None:
        """Until its log contains `text`; RuntimeError when it exits first, TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log(tail=10**7):
                return
            if not self.running():
                raise RuntimeError(f"{self.name} exited (code {self.proc and self.proc.returncode}); "
                                   f"log:\n{self.log()}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} not ready within {timeout:g} s; log:\n{self.log()}")
