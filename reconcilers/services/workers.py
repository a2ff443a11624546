"""The Celery workers now, as Flower shows them: each worker's host, pid, pool, concurrency, the reconcile it
is running, tasks processed since it started, uptime and when it last answered; and, from the database, each
worker's runs and failures over the last hour and its runs per minute (of every cluster, or of some: the
console's cluster picker).

Workers are read through Celery's remote control (`inspect().stats()`, then `inspect().active()` addressed to
the workers that answered, which returns as soon as they all have): bounded by a short timeout, and cached in
Django's cache for a few seconds, so that N page loads make one broadcast per `ttl`. A `stats()` reply is the
worker's ping. The time of each worker's last answer is kept (an hour) so that a worker that stopped answering
is still listed, with its last heartbeat. Celery's event heartbeats are not read: workers may run without
them (`--without-heartbeat`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import current_app
from django.core.cache import cache
from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.utils import timezone

from reconcilers.models import ReconcileRun

#: the remote-control broadcast waits at most this long for replies (seconds)
INSPECT_TIMEOUT = 0.75
#: a reading is reused this long (seconds)
CACHE_TTL = 4.0
#: workers that answered are remembered this long (seconds) to list them when they stop answering
SEEN_TTL = 3600
#: the window of the run counts and of the throughput
WINDOW_MINUTES = 60
#: at most this many worker processes in the per-minute table (bounded query result)
MAX_PROCESSES = 200

CACHE_KEY = "opsconsole:workers:inspect"
SEEN_KEY = "opsconsole:workers:seen"
RECONCILE_TASK = "reconcilers.reconcile"


def _default_inspect(timeout: float, destination: list[str] | None = None) -> Any:
    """The remote-control inspector of the project's Celery app (`celery.current_app`, set as Django starts)."""
    if destination is None:
        return current_app.control.inspect(timeout=timeout)
    return current_app.control.inspect(timeout=timeout, destination=destination, limit=len(destination))


def _pool_name(pool: dict[str, Any]) -> str:
    """'celery.concurrency.prefork:TaskPool' → 'prefork'; threads, solo, eventlet and gevent alike."""
    impl = str(pool.get("implementation") or "")
    module = impl.split(":", 1)[0].rsplit(".", 1)[-1]
    return module or "—"


def _active_task(task: dict[str, Any]) -> dict[str, Any]:
    args = task.get("args") or []
    kwargs = task.get("kwargs") or {}
    key = kwargs.get("key") if isinstance(kwargs, dict) else None
    if key is None and isinstance(args, list | tuple) and args:
        key = args[0]
    started = task.get("time_start")
    return {
        "task": task.get("name") or task.get("type") or "",
        "key": str(key) if key is not None and task.get("name") == RECONCILE_TASK else "",
        "since": datetime.fromtimestamp(started, UTC) if isinstance(started, int | float) else None,
        "pid": task.get("worker_pid"),
    }


def _worker(name: str, stats: dict[str, Any], active: list[dict[str, Any]], now: float) -> dict[str, Any]:
    pool = stats.get("pool") or {}
    host = name.split("@", 1)[1] if "@" in name else name
    totals = stats.get("total") or {}
    uptime = stats.get("uptime")
    return {
        "name": name,
        "host": host,
        "pid": stats.get("pid"),
        "pool": _pool_name(pool),
        "concurrency": pool.get("max-concurrency"),
        "processes": [int(p) for p in pool.get("processes") or [] if isinstance(p, int)],
        "processed": sum(v for v in totals.values() if isinstance(v, int)),
        "reconciles": int(totals.get(RECONCILE_TASK) or 0),
        "uptime_seconds": float(uptime) if isinstance(uptime, int | float) else None,
        "active": [_active_task(t) for t in active],
        "answering": True,
        "last_heartbeat": datetime.fromtimestamp(now, UTC),
    }


def _read(timeout: float, inspect: Callable[..., Any]) -> dict[str, Any]:
    """One broadcast: stats() (every worker that answers within `timeout`), then active() of those workers."""
    started = time.monotonic()
    try:
        stats = inspect(timeout).stats() or {}
        names = sorted(stats)
        active = (inspect(timeout, names).active() or {}) if names else {}
    except Exception as exc:  # the broker did not answer
        return {"workers": [], "error": f"the broker did not answer: {type(exc).__name__}: {exc}",
                "timeout": timeout, "read_at": timezone.now(), "read_seconds": time.monotonic() - started}
    now = time.time()
    workers = [_worker(name, stats[name] or {}, active.get(name) or [], now) for name in names]
    return {"workers": workers, "error": "", "timeout": timeout, "read_at": timezone.now(),
            "read_seconds": time.monotonic() - started}


def _remember(reading: dict[str, Any]) -> list[dict[str, Any]]:
    """Keep the workers that answered; return those seen within SEEN_TTL that did not answer this time."""
    seen: dict[str, dict[str, Any]] = cache.get(SEEN_KEY) or {}
    cutoff = timezone.now() - timedelta(seconds=SEEN_TTL)
    seen = {name: w for name, w in seen.items() if w["last_heartbeat"] >= cutoff}
    answered = {w["name"] for w in reading["workers"]}
    for w in reading["workers"]:
        seen[w["name"]] = {**w, "active": []}
    cache.set(SEEN_KEY, seen, SEEN_TTL)
    if reading["error"]:
        return []
    return [{**w, "answering": False, "active": [], "uptime_seconds": None}
            for name, w in sorted(seen.items()) if name not in answered]


def workers_snapshot(*, timeout: float = INSPECT_TIMEOUT, ttl: float = CACHE_TTL,
                     inspect: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The workers now: {"workers": [...answering, then silent ones seen within the hour], "error",
    "timeout", "read_at", "cached"}. Read at most once per `ttl` seconds (Django's cache); `inspect(timeout,
    destination=None)` returns a Celery `Inspect` (replaced in tests)."""
    reading = cache.get(CACHE_KEY)
    cached = reading is not None
    if reading is None:
        reading = _read(timeout, inspect or _default_inspect)
        reading["silent"] = _remember(reading)
        cache.set(CACHE_KEY, reading, ttl)
    return {**reading, "cached": cached}


def workers_cache_clear() -> None:
    """Forget the cached reading and the workers seen (tests)."""
    cache.delete_many([CACHE_KEY, SEEN_KEY])


def _processes(workers: Iterable[dict[str, Any]]) -> dict[str, str]:
    """'host:pid' of each pool process (as ReconcileRun.worker records it) → its worker's name."""
    return {f"{w['host']}:{pid}": w["name"] for w in workers for pid in w["processes"]}


def _runs_of(clusters: frozenset[str] | None) -> Any:
    """ReconcileRun rows of `clusters` (None: of every cluster)."""
    runs = ReconcileRun.objects.all()
    return runs if clusters is None else runs.filter(cluster__in=sorted(clusters))


def worker_run_counts(workers: list[dict[str, Any]], *, minutes: int = WINDOW_MINUTES,
                      clusters: frozenset[str] | None = None) -> dict[str, dict[str, int]]:
    """Per worker name: {"runs", "failed"} of its pool processes' ReconcileRun rows over the last `minutes` (of
    `clusters`; None: every one) (one aggregate query on the started_at index; processes that were replaced are
    not counted)."""
    by_process = _processes(workers)
    counts: dict[str, dict[str, int]] = {w["name"]: {"runs": 0, "failed": 0} for w in workers}
    if not by_process:
        return counts
    since = timezone.now() - timedelta(minutes=minutes)
    rows = (_runs_of(clusters).filter(started_at__gte=since, worker__in=list(by_process))
            .values("worker").annotate(runs=Count("id"), failed=Count("id", filter=Q(result="error")))
            .order_by())
    for row in rows:
        c = counts[by_process[row["worker"]]]
        c["runs"] += row["runs"]
        c["failed"] += row["failed"]
    return counts


def throughput(workers: list[dict[str, Any]], *, minutes: int = WINDOW_MINUTES,
               clusters: frozenset[str] | None = None) -> list[dict[str, Any]]:
    """Runs per minute over the last `minutes` (of `clusters`; None: every one), per worker (pool processes of a
    known worker are summed; other recorders appear as their 'host:pid'): [{"worker", "per_minute": [n × minutes,
    oldest first], "total", "peak", "last5"}], busiest first. One aggregate query (grouped by recorder and minute)."""
    by_process = _processes(workers)
    now = timezone.now().replace(second=0, microsecond=0)
    first = now - timedelta(minutes=minutes - 1)
    rows = (_runs_of(clusters).filter(started_at__gte=first)
            .annotate(minute=TruncMinute("started_at")).values("worker", "minute")
            .annotate(n=Count("id")).order_by()[: MAX_PROCESSES * minutes])
    series: dict[str, list[int]] = {w["name"]: [0] * minutes for w in workers}
    for row in rows:
        name = by_process.get(row["worker"], row["worker"] or "(unknown)")
        index = int((row["minute"] - first).total_seconds() // 60)
        if 0 <= index < minutes:
            series.setdefault(name, [0] * minutes)[index] += row["n"]
    out = [{"worker": name, "per_minute": s, "total": sum(s), "peak": max(s), "last5": sum(s[-5:])}
           for name, s in series.items()]
    return sorted(out, key=lambda r: (-r["total"], r["worker"]))
