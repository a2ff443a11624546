"""The benchmark's processes: kubesim, the opsconsole controller and Celery workers, the kopf operator; and
their CPU time and peak RSS read from /proc.

Every process is the project's process harness (`reconcilers.authoring.processes.GroupProcess`, shared with the
tests and the pytest plugin): started in its own session (so it and its children are stopped as a group, by its
pid), logging to a file under the run's directory, and stopped with SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from reconcilers.authoring.processes import GroupProcess, celery_worker_command

ROOT = Path(__file__).resolve().parent.parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class ProcSample:
    """One process at one moment: CPU seconds used so far (user + system) and peak RSS (VmHWM)."""

    name: str
    pid: int
    cpu_seconds: float
    peak_rss_kb: int


def proc_sample(name: str, pid: int) -> ProcSample | None:
    """Read /proc/<pid>/stat (utime, stime) and /proc/<pid>/status (VmHWM); None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": field 3 (state) is fields[0]
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15
    hwm = 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return ProcSample(name, pid, cpu, hwm)


def children_of(pid: int) -> list[int]:
    """The direct children of `pid` (from /proc/<pid>/task/*/children)."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                out += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    except OSError:
        return []
    return sorted(set(out))


class Proc(GroupProcess):
    """One subprocess of the benchmark (`reconcilers.authoring.processes.GroupProcess`, run from the project root),
    optionally with its children counted as separate processes. Its stop sends SIGTERM to the process alone (a
    Celery worker then shuts its pool down warmly) and SIGKILL to its whole group after 15 s."""

    log_tail = 4000
    stop_timeout = 15.0
    term_group = False

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_path: Path, *,
                 count_children: bool = False) -> None:
        super().__init__(name, log_path, command=cmd, environment=env, cwd=ROOT)
        self.count_children = count_children

    def alive(self) -> bool:
        """Whether it runs (`running()`)."""
        return self.running()

    def samples(self) -> list[ProcSample]:
        """CPU and peak RSS of this process and (when counted) each of its children."""
        if self.proc is None:
            return []
        out = []
        main = proc_sample(self.name, self.pid)
        if main is not None:
            out.append(main)
        if self.count_children:
            for i, child in enumerate(children_of(self.pid), 1):
                s = proc_sample(f"{self.name} child {i}", child)
                if s is not None:
                    out.append(s)
        return out


def start_kubesim(run_dir: Path, env: dict[str, str], *, schedule_delay: float, start_delay: float,
                  ready_delay: float, token: str, context: str = "kubesim") -> tuple[Proc, str, Path]:
    """A kubesim subprocess on a free 127.0.0.1 port (plain HTTP with a bearer token). Returns (proc, url,
    kubeconfig path) once it serves. Another `context` than kubesim's default names its kubeconfig's context (a
    second cluster's: `kubeconfig-<context>`, merged after the first in KUBECONFIG) and its process and log."""
    suffix = "" if context == "kubesim" else f"-{context}"
    kubeconfig = run_dir / f"kubeconfig{suffix}"
    cmd = [sys.executable, "-m", "kubesim", "--host", "127.0.0.1", "--port", "0", "--kubeconfig", str(kubeconfig),
           f"--token={token}", "--no-tls", "--schedule-delay", str(schedule_delay), "--start-delay", str(start_delay),
           "--ready-delay", str(ready_delay), "--log-level", "WARNING", "--context", context]
    name = "kubesim" if not suffix else f"kubesim {context}"
    proc = Proc(name, cmd, env, run_dir / f"kubesim{suffix}.log").start(stdout=subprocess.PIPE)
    assert proc.proc is not None and proc.proc.stdout is not None
    deadline = time.monotonic() + 30
    line = b""
    while time.monotonic() < deadline:
        line = proc.proc.stdout.readline()
        if line.startswith(b"kubesim serving ") or not line:
            break
    text = line.decode(errors="replace")
    if not text.startswith("kubesim serving "):
        proc.stop()
        raise RuntimeError(f"kubesim did not start: {text!r}\n{proc.log()}")
    # keep reading its stdout so that it never blocks on a full pipe
    def drain() -> None:
        assert proc.proc is not None and proc.proc.stdout is not None
        for _ in proc.proc.stdout:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return proc, text.split()[2], kubeconfig


def opsconsole_procs(run_dir: Path, env: dict[str, str], workers: int, queue: str) -> list[Proc]:
    """`manage.py runcontroller` and `celery worker -c <workers>` (prefork), not yet started."""
    controller = Proc("controller", [sys.executable, "manage.py", "runcontroller"], env, run_dir / "controller.log")
    worker = Proc("celery worker", celery_worker_command(queue, queue, concurrency=workers, loglevel="WARNING",
                                                         heartbeat=False), env, run_dir / "worker.log",
                  count_children=True)
    return [controller, worker]


def cluster_controller_proc(run_dir: Path, env: dict[str, str], cluster: str, context: str) -> Proc:
    """`manage.py runcontroller --cluster CLUSTER --context CONTEXT` (another cluster's controller, no metrics
    port: the first controller's may be taken), not yet started."""
    return Proc(f"controller {cluster}", [sys.executable, "manage.py", "runcontroller", "--cluster", cluster,
                                          "--context", context],
                {**env, "OPSCONSOLE_CONTROLLER_METRICS_PORT": "0"}, run_dir / f"controller-{cluster}.log")


def kopf_proc(run_dir: Path, env: dict[str, str]) -> Proc:
    """`kopf run --standalone --all-namespaces -m bench.converge.kopf_operator`, not yet started."""
    return Proc("kopf", [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", "--quiet",
                         "-m", "bench.converge.kopf_operator"], env, run_dir / "kopf.log")


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds of a server process and all its children, live and reaped (utime + stime + cutime +
    cstime of `pid`, plus utime + stime of each live child): the difference of two readings is what the
    server (e.g. PostgreSQL's postmaster and its backends) used in between, even for short-lived children."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = stat[stat.rindex(")") + 2:].split()
    total = sum(int(x) for x in f[11:15]) / CLK_TCK
    for child in children_of(pid):
        s = proc_sample("", child)
        if s is not None:
            total += s.cpu_seconds
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all CPUs; /proc/stat minus idle and iowait)."""
    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])
    return (total - values[3] - values[4]) / CLK_TCK


def postgres_postmaster(database_url: str) -> int | None:
    """The pid of the PostgreSQL server's postmaster (the parent of our backend), when it runs here."""
    try:
        import psycopg

        with psycopg.connect(database_url, connect_timeout=5) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            backend = int(row[0]) if row else 0
            status = Path(f"/proc/{backend}/status").read_text()  # while the backend lives
        for line in status.splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except Exception:  # noqa: BLE001 - not on this host, or not visible: then it is not reported
        return None
    return None


def redis_server_pid(url: str) -> int | None:
    """The redis-server's pid (INFO server), when it runs here."""
    try:
        import redis

        pid = int(redis.Redis.from_url(url).info("server")["process_id"])
        return pid if Path(f"/proc/{pid}").exists() else None
    except Exception:  # noqa: BLE001
        return None
