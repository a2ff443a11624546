"""One scenario of the benchmark: a fresh kubesim (one per cluster, `bench.converge.clusters`), the operator under
test, a warm-up, the burst, the steady phase (single-cluster scenarios), and the measurements (see the package
docstring)."""

from __future__ import annotations

import os
import secrets
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import load
from .clusters import SimCluster, connect, kubeconfig_list, parse_scenario, running_at, start_clusters
from .databases import (
    database_url,
    db_commits,
    drop_database,
    flush_redis,
    fresh_database,
    prepare_template,
    resources_by_cluster,
)
from .procs import (
    ROOT,
    Proc,
    ProcSample,
    cluster_controller_proc,
    kopf_proc,
    machine_busy_seconds,
    opsconsole_procs,
    postgres_postmaster,
    proc_sample,
    redis_server_pid,
    tree_cpu_seconds,
)
from .results import ClusterResult, Config, PhaseResult, ProcResult, ScenarioResult

__all__ = ["ClusterResult", "Config", "PhaseResult", "ProcResult", "ScenarioResult", "database_url",
           "drop_database", "flush_redis", "fresh_database", "prepare_template", "run_scenario"]

BURST_NS, STEADY_NS, WARMUP_NS = "bench", "steady", "warmup"


# -- kubesim's statistics --------------------------------------------------------------------------------


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


# -- one scenario ------------------------------------------------------------------------------------------


def _phase(keys: list[str], created: dict[str, float], t0: float, running: dict[str, float], converged: bool,
           runs: list[tuple[str, float, float, str]], rate: float = 0.0) -> PhaseResult:
    running_at = {k: running[k] for k in keys if k in running}
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


def _burst(cfg: Config, sims: list[SimCluster], names: list[str]) -> tuple[float, dict[str, float]]:
    """Create the burst's CRs in every cluster at once (a thread per cluster, each with its creating threads):
    (the first create's start, key → when its create returned)."""
    created: dict[str, float] = {}
    t0 = time.time()
    if len(sims) == 1:
        return t0, load.create_burst(sims[0].api, BURST_NS, names, cfg.size, threads=cfg.creator_threads)
    with ThreadPoolExecutor(max_workers=len(sims), thread_name_prefix="burst") as pool:
        for part in pool.map(lambda sim: load.create_burst(sim.api, BURST_NS, names, cfg.size,
                                                           threads=cfg.creator_threads, cluster=sim.name), sims):
            created.update(part)
    return t0, created


def _wait_all(sims: list[SimCluster], keys: dict[str, list[str]], timeout: float) -> bool:
    """Whether every cluster's keys were seen Running within `timeout` (in all)."""
    deadline = time.monotonic() + timeout
    ok = True
    for sim in sims:
        assert sim.tracker is not None
        ok = sim.tracker.wait_running(keys[sim.name], max(0.0, deadline - time.monotonic())) and ok
    return ok


def _stop_all(procs: list[Proc]) -> None:
    """Stop the processes at once (each its SIGTERM, then SIGKILL after its grace), waiting for them all."""
    if procs:
        with ThreadPoolExecutor(max_workers=len(procs), thread_name_prefix="stop") as pool:
            list(pool.map(lambda proc: proc.stop(), procs))


def run_scenario(cfg: Config, name: str, template_db: str | None, log: Any = print) -> ScenarioResult:
    """Run the scenario `opsconsole-<workers>[@<clusters>]` or `kopf` end to end; never raises for the operator's
    failures (they end up in `error`)."""
    operator_kind, workers, clusters = parse_scenario(name)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = cfg.data_dir / f"{stamp}-{name.replace('@', '-at-')}-n{cfg.n}"
    run_dir.mkdir(parents=True, exist_ok=True)
    result = ScenarioResult(name, cfg.n, run_dir=str(run_dir), clusters=clusters)
    token = secrets.token_urlsafe(16)
    base_env = {**os.environ, "PYTHONPATH": str(ROOT), "OPSCONSOLE_DATA_DIR": str(cfg.data_dir)}
    sims = start_clusters(run_dir, base_env, clusters, token, schedule_delay=cfg.schedule_delay,
                          start_delay=cfg.start_delay, ready_delay=cfg.ready_delay)
    operator: list[Proc] = []
    db_name: str | None = None
    try:
        connect(sims, [BURST_NS, STEADY_NS, WARMUP_NS])
        kubeconfig = kubeconfig_list(sims)

        if operator_kind == "opsconsole":
            assert template_db is not None
            db_name = fresh_database(cfg, template_db, name.replace("@", "_at_"))
            db_url = database_url(cfg.pg_url, db_name)
            if cfg.flush_redis:
                flush_redis(cfg.redis_url)
            queue = f"bench-converge-{uuid.uuid4().hex[:8]}"
            env = {**base_env, "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "DATABASE_URL": db_url,
                   "REDIS_URL": cfg.redis_url, "OPSCONSOLE_CELERY_QUEUE": queue, "KUBECONFIG": kubeconfig,
                   "OPSCONSOLE_RECONCILERS": "reconcilers.kinds.memcached.MemcachedReconciler",
                   "OPSCONSOLE_BUILTIN_KINDS": "0", "LOG_LEVEL": "WARNING", **cfg.opsconsole_env}
            operator = opsconsole_procs(run_dir, env, workers, queue)
            operator[1:1] = [cluster_controller_proc(run_dir, env, sim.name, sim.context) for sim in sims[1:]]

            def runs() -> list[tuple[str, float, float, str]]:
                return load.runs_from_database(db_url)
        else:
            kopf_log = run_dir / "kopf-runs.log"
            env = {**base_env, "KUBECONFIG": kubeconfig, "BENCH_KOPF_LOG": str(kopf_log)}
            operator = [kopf_proc(run_dir, env)]

            def runs() -> list[tuple[str, float, float, str]]:
                return load.runs_from_kopf_log(kopf_log)

        started = time.monotonic()
        for proc in operator:
            proc.start()
        warm_names = [f"warm-{i}" for i in range(3)]
        warm = {sim.name: [load.key_of(WARMUP_NS, n, sim.name) for n in warm_names] for sim in sims}
        for sim in sims:
            load.create_burst(sim.api, WARMUP_NS, warm_names, cfg.size, threads=1, cluster=sim.name)
        if not _wait_all(sims, warm, cfg.startup_timeout):
            dead = [p.name for p in operator if not p.alive()]
            raise RuntimeError(f"warm-up CRs not Running within {cfg.startup_timeout:g} s"
                               + (f"; exited: {', '.join(dead)}" if dead else "")
                               + "".join(f"\n--- {p.name} log ---\n{p.log()}" for p in operator))
        log(f"[{name}] warm-up Running {time.monotonic() - started:.1f} s after the operator's start")
        time.sleep(1.0)  # the warm-up's follow-up events settle
        everything = [*(sim.proc for sim in sims), *operator]
        servers = {"postgres server (shared)": postgres_postmaster(cfg.pg_url),
                   "redis-server (shared)": redis_server_pid(cfg.redis_url)}
        result.loadavg_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        before = {s.pid: s for p in everything for s in p.samples()}
        me = proc_sample("bench (load + watch)", os.getpid())
        if me is not None:
            before[me.pid] = me
        servers_before = {n: tree_cpu_seconds(pid) for n, pid in servers.items() if pid}
        stats_before = {sim.name: _kubesim_stats(sim.url, token) for sim in sims}
        commits_before = db_commits(cfg, db_name) if db_name else 0
        busy_before, window_start = machine_busy_seconds(), time.monotonic()

        names = [f"mc-{i:04d}" for i in range(cfg.n)]
        keys = {sim.name: [load.key_of(BURST_NS, n, sim.name) for n in names] for sim in sims}
        every_key = [k for sim in sims for k in keys[sim.name]]
        log(f"[{name}] burst: creating {cfg.n} Memcached CRs" + (f" in each of {clusters} clusters" if clusters > 1
                                                                   else ""))
        t0, created = _burst(cfg, sims, names)
        log(f"[{name}] burst: {len(every_key)} created in {time.time() - t0:.1f} s; waiting for Running")
        converged = _wait_all(sims, keys, cfg.timeout)
        running = running_at(sims)
        if not converged:
            log(f"[{name}] burst: only {sum(1 for k in every_key if k in running)}/{len(every_key)} Running "
                f"after {cfg.timeout:g} s")
        burst_runs = runs()
        result.burst = _phase(every_key, created, t0, running, converged, burst_runs)
        if clusters > 1:
            for sim in sims:
                mine = keys[sim.name]
                done = all(k in running for k in mine)
                result.per_cluster.append(ClusterResult(sim.name, _phase(
                    mine, {k: created[k] for k in mine}, t0, running, done, burst_runs)))

        steady = converged and cfg.steady_seconds > 0 and cfg.steady_rate > 0 and clusters == 1
        if converged and (steady or cfg.clusters > 1):
            result.quiet_after_seconds = _wait_quiet(runs, result.burst.seconds + t0, cfg.quiet_timeout)
            log(f"[{name}] quiet {result.quiet_after_seconds:.1f} s after the burst converged")
            # the clusters comparison prices the whole burst, its tail of follow-up reconciles included
            result.burst_operator_cpu = sum(s.cpu_seconds for s in _cpu_delta(
                before, [s for p in operator for s in p.samples()]))
            result.burst_kubesim_cpu = sum(s.cpu_seconds for s in _cpu_delta(
                before, [s for sim in sims for s in sim.proc.samples()]))
        if steady:
            tracker = sims[0].tracker
            assert tracker is not None
            m = max(1, int(round(cfg.steady_rate * cfg.steady_seconds)))
            snames = [f"st-{i:04d}" for i in range(m)]
            skeys = [load.key_of(STEADY_NS, n) for n in snames]
            log(f"[{name}] steady: {m} CRs at {cfg.steady_rate:g}/s")
            t1 = time.time()
            screated = load.create_at_rate(sims[0].api, STEADY_NS, snames, cfg.size, cfg.steady_rate)
            sconverged = tracker.wait_running(skeys, cfg.timeout)
            result.steady = _phase(skeys, screated, t1, running_at(sims), sconverged, runs(), rate=cfg.steady_rate)

        after = [s for p in everything for s in p.samples()]
        me = proc_sample("bench (load + watch)", os.getpid())
        if me is not None:
            after.append(me)
        result.machine_busy_seconds = machine_busy_seconds() - busy_before
        for sim in sims:
            stats_after = _kubesim_stats(sim.url, token)
            writes = int(stats_after["resourceVersion"]) - int(stats_before[sim.name]["resourceVersion"])
            requests = _requests_delta(stats_before[sim.name].get("requests", {}), stats_after.get("requests", {}))
            result.api_writes += writes
            for kind, count in requests.items():
                result.api_requests[kind] = result.api_requests.get(kind, 0) + count
            for c in result.per_cluster:
                if c.cluster == sim.name:
                    c.api_writes, c.api_requests = writes, sum(requests.values())
        result.api_requests = dict(sorted(result.api_requests.items(), key=lambda kv: (-kv[1], kv[0])))
        if db_name:
            time.sleep(1.0)  # backends flush their statistics about once a second
            result.db_commits = db_commits(cfg, db_name) - commits_before
            result.resources_by_cluster = resources_by_cluster(cfg, db_name)
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
        for sim in sims:
            if sim.tracker is not None:
                sim.tracker.stop()
        stopping = time.monotonic()
        _stop_all(operator)  # first: the controllers release their Leases on their kubesims
        _stop_all([sim.proc for sim in sims])
        log(f"[{name}] processes stopped in {time.monotonic() - stopping:.1f} s")
        if db_name and not cfg.keep:
            try:
                drop_database(cfg, db_name)
            except Exception as exc:  # noqa: BLE001
                log(f"[{name}] could not drop {db_name}: {exc}")
    return result
