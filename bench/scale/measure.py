"""What the benchmark reads: CPU seconds, RSS and PSS of each process (/proc), the Redis database's bytes, the
PostgreSQL database's size, and the engine's record of its work (the Resource mirror's phases, the ReconcileRun
rows) in the bench database.

CPU seconds come from bench/converge's `proc_sample`; RSS here is the current resident set (VmRSS), not the peak,
and PSS (smaps_rollup) splits the pages a prefork worker's children share with their parent among them, so the
worker's PSS adds up where its RSS counts shared pages once per process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.converge.procs import Proc, children_of, proc_sample


@dataclass
class ProcSnap:
    """One process at one moment."""

    name: str
    pid: int
    cpu_seconds: float
    rss_kb: int
    pss_kb: int


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, Pss) of `pid` in KiB; (0, 0) when it is gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def snapshot(procs: list[Proc]) -> dict[int, ProcSnap]:
    """pid -> the process's CPU seconds and memory, for each process and (where counted) each child."""
    out: dict[int, ProcSnap] = {}
    for proc in procs:
        if not proc.alive():
            continue
        pids = [(proc.name, proc.pid)]
        if proc.count_children:
            pids += [(f"{proc.name} child {i}", c) for i, c in enumerate(children_of(proc.pid), 1)]
        for name, pid in pids:
            sample = proc_sample(name, pid)
            if sample is None:
                continue
            rss, pss = memory_kb(pid)
            out[pid] = ProcSnap(name, pid, sample.cpu_seconds, rss, pss)
    return out


def group_of(name: str) -> str:
    """The process group a figure is summed under: `controller`, `workers` (the worker and its pool children) or
    `kubesim`."""
    return "workers" if name.startswith("celery worker") else name


def cpu_by_group(before: dict[int, ProcSnap], after: dict[int, ProcSnap]) -> dict[str, float]:
    """CPU seconds each group used between two snapshots (a process started in between counts from 0; one gone
    in between is lost, which the pool does not do at rest: its children are not recycled)."""
    out: dict[str, float] = {}
    for pid, snap in after.items():
        base = before.get(pid)
        out[group_of(snap.name)] = out.get(group_of(snap.name), 0.0) + snap.cpu_seconds - (
            base.cpu_seconds if base else 0.0)
    return out


def memory_by_group(snaps: dict[int, ProcSnap]) -> dict[str, tuple[int, int]]:
    """group -> (RSS, PSS) in KiB, summed over its processes."""
    out: dict[str, tuple[int, int]] = {}
    for snap in snaps.values():
        rss, pss = out.get(group_of(snap.name), (0, 0))
        out[group_of(snap.name)] = (rss + snap.rss_kb, pss + snap.pss_kb)
    return out


def redis_bytes(url: str) -> tuple[int, int]:
    """(the bytes of every key in the database of `url`, by MEMORY USAGE; the server's used_memory). The first
    is ours alone; the second is the whole server's, other databases included."""
    import redis

    client = redis.Redis.from_url(url)
    total = 0
    batch: list[Any] = []

    def flush() -> int:
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
        used = sum(int(v or 0) for v in pipe.execute())
        batch.clear()
        return used

    for key in client.scan_iter(count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            total += flush()
    if batch:
        total += flush()
    return total, int(client.info("memory")["used_memory"])


class Record:
    """The bench database, read with one autocommit connection: the mirror's phases and the reconcile runs."""

    def __init__(self, admin_url: str, database_url: str, database: str) -> None:
        import psycopg

        self.database = database
        self.conn = psycopg.connect(database_url, autocommit=True)
        self.admin = psycopg.connect(admin_url, autocommit=True)

    def close(self) -> None:
        """Close both connections."""
        self.conn.close()
        self.admin.close()

    def _one(self, sql: str, *params: Any) -> Any:
        row = self.conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
        return row[0] if row else None

    def running(self, namespace: str, kind: str) -> int:
        """Live mirror rows of `kind` in `namespace` whose phase is Running."""
        return int(self._one("SELECT count(*) FROM reconcilers_resource WHERE namespace = %s AND kind = %s "
                             "AND phase = 'Running' AND NOT deleted", namespace, kind))

    def runs_since(self, since: float, until: float | None = None) -> int:
        """ReconcileRun rows started in [since, until) (unix times)."""
        end = until if until is not None else time.time() + 3600
        return int(self._one("SELECT count(*) FROM reconcilers_reconcilerun WHERE started_at >= %s "
                             "AND started_at < %s", _at(since), _at(end)))

    def last_start(self) -> float:
        """When the newest reconcile started (unix time; 0 when none did), the spread periodic resync's runs left
        out: it reconciles N / 36,000 keys a second for ever (above ~12,000 objects, a run every 3 s or more
        often), so the queue would never count as idle."""
        at = self._one("SELECT max(started_at) FROM reconcilers_reconcilerun WHERE NOT (jsonb_array_length(triggers)"
                       " = 1 AND triggers->0->>'type' = 'resync' AND NOT triggers->0 ? 'reason')")
        return at.timestamp() if at is not None else 0.0

    def first_start(self, key: str, since: float) -> float | None:
        """When `key`'s first reconcile at or after `since` started (unix time), if one did."""
        at = self._one("SELECT min(started_at) FROM reconcilers_reconcilerun WHERE key = %s AND started_at >= %s",
                       key, _at(since))
        return at.timestamp() if at is not None else None

    def size(self) -> int:
        """pg_database_size of the bench database, in bytes."""
        row = self.admin.execute("SELECT pg_database_size(%s)", (self.database,)).fetchone()
        return int(row[0]) if row else 0

    def wait_running(self, namespace: str, kind: str, n: int, timeout: float) -> bool:
        """Until `n` objects are Running in the mirror; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.running(namespace, kind) < n:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)
        return True

    def wait_quiet(self, quiet: float, timeout: float) -> float:
        """Until no reconcile has started for `quiet` seconds (the queue is idle); returns when the last one
        started (unix time)."""
        deadline = time.monotonic() + timeout
        while True:
            last = self.last_start()
            if time.time() - last >= quiet or time.monotonic() > deadline:
                return last
            time.sleep(0.5)

    def wait_first_start(self, key: str, since: float, timeout: float) -> float | None:
        """Until `key` has a reconcile started at or after `since`; its start (unix time), None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.first_start(key, since)
            if at is not None or time.monotonic() > deadline:
                return at
            time.sleep(0.2)


def _at(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, UTC)
