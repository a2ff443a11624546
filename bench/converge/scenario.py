"""One scenario of the benchmark: a fresh kubesim, the operator under test, a warm-up, the burst, the steady
phase, and the measurements (see the package docstring)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from reconcilers.engine import kube

from . import load
from .procs import (
    ROOT,
    Proc,
    ProcSample,
    kopf_proc,
    machine_busy_seconds,
    opsconsole_procs,
    postgres_postmaster,
    proc_sample,
    redis_server_pid,
    start_kubesim,
    tree_cpu_seconds,
)

BURST_NS, STEADY_NS, WARMUP_NS = "bench", "steady", "warmup"


@dataclass
class Config:
    """Everything a run is configured with (the CLI's options)."""

    n: int = 200
    size: int = 1
    scenarios: tuple[str, ...] = ("opsconsole-1", "opsconsole-2", "kopf")
    steady_rate: float = 5.0
    steady_seconds: float = 20.0
    timeout: float = 300.0
    quiet_timeout: float = 120.0  # at most this long to wait for the burst's tail before the steady phase
    startup_timeout: float = 90.0
    creator_threads: int = 4
    schedule_delay: float = 0.0
    start_delay: float = 0.0
    ready_delay: float = 0.0
    pg_url: str = "postgres://postgres@127.0.0.1:5432/postgres"
    db_prefix: str = "bench_e"
    redis_url: str = "redis://127.0.0.1:6379/5"
    data_dir: Path = Path("/tmp/oc-e/bench-converge")
    flush_redis: bool = False  # FLUSHDB the Redis database first (only on a database of your own)
    opsconsole_env: dict[str, str] = field(default_factory=dict)
    keep: bool = False


@dataclass
class ProcResult:
    name: str
    cpu_seconds: float
    peak_rss_mb: float


@dataclass
class PhaseResult:
    """A burst or a steady phase."""

    crs: int
    converged: bool
    running: int
    seconds: float  # first create → last Running (burst) or first create → last Running (steady)
    reconciles: int
    errors: int
    start_p50_ms: float  # create returned → first reconcile start
    start_p99_ms: float
    start_max_ms: float
    running_p50_s: float  # create returned → seen Running
    running_p99_s: float
    mean_reconcile_ms: float
    rate: float = 0.0  # steady phase: CRs created per second

    @property
    def crs_per_second(self) -> float:
        return self.crs / self.seconds if self.seconds > 0 else 0.0

    @property
    def reconciles_per_second(self) -> float:
        return self.reconciles / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ScenarioResult:
    name: str
    n: int
    label: str = ""  # the name in tables (with "#k" when a scenario runs more than once)
    burst: PhaseResult | None = None
    steady: PhaseResult | None = None
    procs: list[ProcResult] = field(default_factory=list)
    servers: list[ProcResult] = field(default_factory=list)  # PostgreSQL and Redis (shared with others)
    machine_busy_seconds: float = 0.0  # CPU seconds the whole machine was busy during the measurement
    api_writes: int = 0  # kubesim resourceVersion increase over the measurement (every write bumps it)
    #: API requests kubesim served over the measurement, by `verb resource[/subresource]` (the bench's own included)
    api_requests: dict[str, int] = field(default_factory=dict)
    db_commits: int = 0  # PostgreSQL transactions committed in the scenario's database (opsconsole)
    window_seconds: float = 0.0
    quiet_after_seconds: float = 0.0  # after the burst converged, until no reconcile had started for QUIET s
    loadavg_before: str = ""
    error: str = ""
    run_dir: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or self.name

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for phase in ("burst", "steady"):
            p = getattr(self, phase)
            if p is not None:
                d[phase]["crs_per_second"] = p.crs_per_second
                d[phase]["reconciles_per_second"] = p.reconciles_per_second
        return d


# -- the database and Redis --------------------------------------------------------------------------------


def database_url(admin_url: str, name: str) -> str:
    """`admin_url` with its database replaced by `name`."""
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _admin(cfg: Config, *statements: str) -> None:
    import psycopg

    with psycopg.connect(cfg.pg_url, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)  # type: ignore[arg-type]


def prepare_template(cfg: Config) -> str:
    """A freshly migrated database that every opsconsole scenario's database is cloned from."""
    name = f"{cfg.db_prefix}_template"
    _admin(cfg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    env = {**os.environ, "DATABASE_URL": database_url(cfg.pg_url, name),
           "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "OPSCONSOLE_DATA_DIR": str(cfg.data_dir),
           "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    return name


def fresh_database(cfg: Config, template: str, scenario: str) -> str:
    name = f"{cfg.db_prefix}_{scenario.replace('-', '_')}"
    _admin(cfg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def drop_database(cfg: Config, name: str) -> None:
    _admin(cfg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _db_commits(cfg: Config, name: str) -> int:
    import psycopg

    with psycopg.connect(cfg.pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


def _kubesim_stats(url: str, token: str) -> dict[str, Any]:
    """kubesim's `/kubesim/stats`: its resourceVersion and the requests it served, by type."""
    import json
    import urllib.request

    req = urllib.request.Request(url + "/kubesim/stats", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        stats: dict[str, Any] = json.loads(resp.read())
    return stats


def _requests_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The requests served between two stats, by type, the most frequent first."""
    delta = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    return dict(sorted(delta.items(), key=lambda kv: (-kv[1], kv[0])))


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


# -- one scenario ------------------------------------------------------------------------------------------


def _phase(keys: list[str], created: dict[str, float], t0: float, tracker: load.Tracker, converged: bool,
           runs: list[tuple[str, float, float, str]], rate: float = 0.0) -> PhaseResult:
    running_at = {k: tracker.running_at[k] for k in keys if k in tracker.running_at}
    t_end = max(running_at.values()) if converged and running_at else time.time()
    wanted = set(keys)
    window = [r for r in runs if r[0] in wanted and t0 <= r[1] <= t_end]
    firsts = load.first_starts(r for r in runs if r[0] in wanted)
    starts = load.latencies(created, firsts)
    to_running = load.latencies(created, running_at)
    durations = [r[2] for r in window]
    return PhaseResult(
        crs=len(keys), converged=converged, running=len(running_at), seconds=t_end - t0, reconciles=len(window),
        errors=sum(1 for r in window if r[3] == "error"),
        start_p50_ms=load.percentile(starts, 50) * 1000, start_p99_ms=load.percentile(starts, 99) * 1000,
        start_max_ms=max(starts) * 1000 if starts else float("nan"),
        running_p50_s=load.percentile(to_running, 50), running_p99_s=load.percentile(to_running, 99),
        mean_reconcile_ms=sum(durations) / len(durations) * 1000 if durations else float("nan"), rate=rate,
    )


QUIET = 1.5


def _wait_quiet(runs: Any, converged_at: float, timeout: float) -> float:
    """Wait until no reconcile started for QUIET seconds (the burst's tail of follow-up events has been
    worked off), so that the steady phase measures a steady load; returns the seconds after convergence."""
    deadline = time.monotonic() + timeout
    while True:
        latest = max((r[1] for r in runs()), default=0.0)
        now = time.time()
        if now - latest >= QUIET or time.monotonic() > deadline:
            return max(0.0, min(latest, now) - converged_at)
        time.sleep(0.5)


def _cpu_delta(before: dict[int, ProcSample], after: list[ProcSample]) -> list[ProcResult]:
    out = []
    for s in after:
        base = before.get(s.pid)
        out.append(ProcResult(s.name, s.cpu_seconds - (base.cpu_seconds if base else 0.0), s.peak_rss_kb / 1024))
    return out


def run_scenario(cfg: Config, name: str, template_db: str | None, log: Any = print) -> ScenarioResult:
    """Run the scenario `opsconsole-<workers>` or `kopf` end to end; never raises for the operator's
    failures (they end up in `error`)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = cfg.data_dir / f"{stamp}-{name}-n{cfg.n}"
    run_dir.mkdir(parents=True, exist_ok=True)
    result = ScenarioResult(name, cfg.n, run_dir=str(run_dir))
    token = secrets.token_urlsafe(16)
    base_env = {**os.environ, "PYTHONPATH": str(ROOT), "OPSCONSOLE_DATA_DIR": str(cfg.data_dir)}
    kubesim, url, kubeconfig = start_kubesim(run_dir, base_env, schedule_delay=cfg.schedule_delay,
                                              start_delay=cfg.start_delay, ready_delay=cfg.ready_delay, token=token)
    operator: list[Proc] = []
    tracker: load.Tracker | None = None
    db_name: str | None = None
    try:
        api = kube.build_api_client(kubeconfig)
        load.install(api, [BURST_NS, STEADY_NS, WARMUP_NS])
        tracker = load.Tracker(api)
        tracker.start()
        tracker.synced.wait(10)

        if name.startswith("opsconsole-"):
            workers = int(name.split("-", 1)[1])
            assert template_db is not None
            db_name = fresh_database(cfg, template_db, name)
            db_url = database_url(cfg.pg_url, db_name)
            if cfg.flush_redis:
                flush_redis(cfg.redis_url)
            queue = f"bench-converge-{uuid.uuid4().hex[:8]}"
            env = {**base_env, "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "DATABASE_URL": db_url,
                   "REDIS_URL": cfg.redis_url, "OPSCONSOLE_CELERY_QUEUE": queue, "KUBECONFIG": str(kubeconfig),
                   "OPSCONSOLE_RECONCILERS": "reconcilers.kinds.memcached.MemcachedReconciler",
                   "OPSCONSOLE_BUILTIN_KINDS": "0", "LOG_LEVEL": "WARNING", **cfg.opsconsole_env}
            operator = opsconsole_procs(run_dir, env, workers, queue)

            def runs() -> list[tuple[str, float, float, str]]:
                return load.runs_from_database(db_url)
        elif name == "kopf":
            kopf_log = run_dir / "kopf-runs.log"
            env = {**base_env, "KUBECONFIG": str(kubeconfig), "BENCH_KOPF_LOG": str(kopf_log)}
            operator = [kopf_proc(run_dir, env)]

            def runs() -> list[tuple[str, float, float, str]]:
                return load.runs_from_kopf_log(kopf_log)
        else:
            raise ValueError(f"unknown scenario {name!r} (opsconsole-<workers> or kopf)")

        for proc in operator:
            proc.start()
        warm = [load.key_of(WARMUP_NS, f"warm-{i}") for i in range(3)]
        load.create_burst(api, WARMUP_NS, [f"warm-{i}" for i in range(3)], cfg.size, threads=1)
        if not tracker.wait_running(warm, cfg.startup_timeout):
            dead = [p.name for p in operator if not p.alive()]
            raise RuntimeError(f"warm-up CRs not Running within {cfg.startup_timeout:g} s"
                               + (f"; exited: {', '.join(dead)}" if dead else "")
                               + "".join(f"\n--- {p.name} log ---\n{p.log()}" for p in operator))
        time.sleep(1.0)  # the warm-up's follow-up events settle
        everything = [kubesim, *operator]
        servers = {"postgres server (shared)": postgres_postmaster(cfg.pg_url),
                   "redis-server (shared)": redis_server_pid(cfg.redis_url)}
        result.loadavg_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        before = {s.pid: s for p in everything for s in p.samples()}
        me = proc_sample("bench (load + watch)", os.getpid())
        if me is not None:
            before[me.pid] = me
        servers_before = {n: tree_cpu_seconds(pid) for n, pid in servers.items() if pid}
        stats_before = _kubesim_stats(url, token)
        commits_before = _db_commits(cfg, db_name) if db_name else 0
        busy_before, window_start = machine_busy_seconds(), time.monotonic()

        names = [f"mc-{i:04d}" for i in range(cfg.n)]
        keys = [load.key_of(BURST_NS, n) for n in names]
        log(f"[{name}] burst: creating {cfg.n} Memcached CRs")
        t0 = time.time()
        created = load.create_burst(api, BURST_NS, names, cfg.size, threads=cfg.creator_threads)
        log(f"[{name}] burst: {cfg.n} created in {time.time() - t0:.1f} s; waiting for Running")
        converged = tracker.wait_running(keys, cfg.timeout)
        if not converged:
            log(f"[{name}] burst: only {tracker.count_running(keys)}/{cfg.n} Running after {cfg.timeout:g} s")
        burst_runs = runs()
        result.burst = _phase(keys, created, t0, tracker, converged, burst_runs)

        if converged and cfg.steady_seconds > 0 and cfg.steady_rate > 0:
            result.quiet_after_seconds = _wait_quiet(runs, result.burst.seconds + t0, cfg.quiet_timeout)
            log(f"[{name}] quiet {result.quiet_after_seconds:.1f} s after the burst converged")
            m = max(1, int(round(cfg.steady_rate * cfg.steady_seconds)))
            snames = [f"st-{i:04d}" for i in range(m)]
            skeys = [load.key_of(STEADY_NS, n) for n in snames]
            log(f"[{name}] steady: {m} CRs at {cfg.steady_rate:g}/s")
            t1 = time.time()
            screated = load.create_at_rate(api, STEADY_NS, snames, cfg.size, cfg.steady_rate)
            sconverged = tracker.wait_running(skeys, cfg.timeout)
            result.steady = _phase(skeys, screated, t1, tracker, sconverged, runs(), rate=cfg.steady_rate)

        after = [s for p in everything for s in p.samples()]
        me = proc_sample("bench (load + watch)", os.getpid())
        if me is not None:
            after.append(me)
        result.machine_busy_seconds = machine_busy_seconds() - busy_before
        stats_after = _kubesim_stats(url, token)
        result.api_writes = int(stats_after["resourceVersion"]) - int(stats_before["resourceVersion"])
        result.api_requests = _requests_delta(stats_before.get("requests", {}), stats_after.get("requests", {}))
        if db_name:
            time.sleep(1.0)  # backends flush their statistics about once a second
            result.db_commits = _db_commits(cfg, db_name) - commits_before
        result.window_seconds = time.monotonic() - window_start
        result.procs = _cpu_delta(before, after)
        for n, cpu0 in servers_before.items():
            pid = servers[n]
            cpu1 = tree_cpu_seconds(pid) if pid else None
            if cpu0 is not None and cpu1 is not None:
                result.servers.append(ProcResult(n, cpu1 - cpu0, float("nan")))
    except Exception as exc:  # noqa: BLE001 - a failed scenario is reported, the others still run
        result.error = f"{type(exc).__name__}: {exc}"
        log(f"[{name}] failed: {result.error}")
    finally:
        if tracker is not None:
            tracker.stop()
        for proc in reversed(operator):
            proc.stop()
        kubesim.stop()
        if db_name and not cfg.keep:
            try:
                drop_database(cfg, db_name)
            except Exception as exc:  # noqa: BLE001
                log(f"[{name}] could not drop {db_name}: {exc}")
    return result
