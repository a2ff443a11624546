"""One N end to end: a fresh kubesim, database and worker queue; the controller and the workers of the tree under
test; a warm-up; the baseline; N objects created and converged; the rest window; the memory, Redis and PostgreSQL
figures; then the console pages, the audit commands, the start-up and the failover (operations.py), which reconcile
everything again and so come after the rest window.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.converge import load
from bench.converge.procs import ROOT, Proc, machine_busy_seconds, start_kubesim
from bench.converge.scenario import Config as ConvergeConfig
from bench.converge.scenario import _kubesim_stats, database_url, drop_database, flush_redis, fresh_database
from reconcilers.authoring.processes import celery_worker_command
from reconcilers.engine import kube

from . import operations
from .kinds import KINDS, BenchKind
from .measure import ProcSnap, Record, cpu_by_group, memory_by_group, redis_bytes, snapshot

NAMESPACE, WARMUP_NS, PROBE_NS = "scale", "scale-warmup", "scale-probe"
GROUPS = ("controller", "workers", "kubesim")

Log = Callable[[str], None]


@dataclass
class Config:
    """The CLI's options."""

    ns: tuple[int, ...] = (1000, 5000)
    kind: str = "memcached"
    workers: int = 4
    rest_seconds: float = 600.0
    timeout: float = 1200.0  # for each wait: convergence, a probe's reconcile, the queue going idle
    startup_timeout: float = 90.0
    creator_threads: int = 4
    page_requests: int = 30
    quiet_seconds: float = 3.0  # the queue counts as idle once no reconcile started for this long
    pg_url: str = "postgres://postgres@127.0.0.1:5432/postgres"
    db_prefix: str = "bench_scale"
    redis_url: str = "redis://127.0.0.1:6379/9"
    flush_redis: bool = False
    data_dir: Path = Path("/tmp/oc-bench-scale")
    trees: tuple[tuple[str, Path], ...] = (("main", ROOT),)
    opsconsole_env: dict[str, str] = field(default_factory=dict)
    keep: bool = False
    skip: tuple[str, ...] = ()  # operations after the window left out (operations.OPERATIONS)

    def converge_config(self) -> ConvergeConfig:
        """bench/converge's configuration for its database helpers."""
        return ConvergeConfig(pg_url=self.pg_url, db_prefix=self.db_prefix, data_dir=self.data_dir)


class Fleet:
    """The processes and connections of one N; `close()` stops and drops them."""

    def __init__(self, cfg: Config, label: str, root: Path, n: int, template: str, log: Log) -> None:
        self.cfg, self.label, self.root, self.n, self.log = cfg, label, root, n, log
        self.kind: BenchKind = KINDS[cfg.kind]
        self.run_dir = cfg.data_dir / f"{time.strftime('%Y%m%d-%H%M%S')}-{label}-n{n}"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.token = secrets.token_urlsafe(16)
        base = {**os.environ, "PYTHONPATH": str(ROOT), "OPSCONSOLE_DATA_DIR": str(self.run_dir)}
        self.kubesim, self.kubesim_url, kubeconfig = start_kubesim(self.run_dir, base, schedule_delay=0.0,
                                                                   start_delay=0.0, ready_delay=0.0,
                                                                   token=self.token)
        self.api = kube.build_api_client(kubeconfig)
        self.db_name = fresh_database(cfg.converge_config(), template, f"{label}_n{n}")
        self.db_url = database_url(cfg.pg_url, self.db_name)
        if cfg.flush_redis:
            flush_redis(cfg.redis_url)
        self.queue = f"bench-scale-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "PYTHONPATH": str(root), "OPSCONSOLE_DATA_DIR": str(self.run_dir),
                    "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "DATABASE_URL": self.db_url,
                    "REDIS_URL": cfg.redis_url, "OPSCONSOLE_CELERY_QUEUE": self.queue, "KUBECONFIG": str(kubeconfig),
                    "OPSCONSOLE_RECONCILERS": self.kind.reconciler, "OPSCONSOLE_BUILTIN_KINDS": "0",
                    "LOG_LEVEL": "WARNING", "OPSCONSOLE_CONTROLLER_METRICS_PORT": "0", **cfg.opsconsole_env}
        self.record = Record(cfg.pg_url, self.db_url, self.db_name)
        self.controller = self.new_controller("controller")
        self.worker = self.proc("celery worker", celery_worker_command(
            self.queue, self.queue, concurrency=cfg.workers, loglevel="WARNING", heartbeat=False), "worker.log",
            count_children=True)
        self.others: list[Proc] = []  # the controllers that start-up and failover start
        self.baseline: dict[int, ProcSnap] = {}  # the processes before the N objects were created
        self.redis0: tuple[int, int] = (0, 0)
        self.pg0 = 0

    def proc(self, name: str, cmd: list[str], log_name: str, *, count_children: bool = False) -> Proc:
        """A process of the tree under test (run from its root), not yet started."""
        proc = Proc(name, cmd, self.env, self.run_dir / log_name, count_children=count_children)
        proc.cwd = self.root
        return proc

    def new_controller(self, log_name: str) -> Proc:
        """A `manage.py runcontroller` of the tree under test, not yet started."""
        return self.proc("controller", [sys.executable, "manage.py", "runcontroller"], f"{log_name}.log")

    def install(self) -> None:
        """The kind's CRD (until its objects are served) and the namespaces."""
        kube.ensure_object(self.api, load.CRD, self.kind.crd())
        for ns in (NAMESPACE, WARMUP_NS, PROBE_NS):
            kube.ensure_object(self.api, load.NAMESPACE,
                               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        deadline = time.monotonic() + 30
        while True:
            try:
                kube.list_objects(self.api, self.kind.resource, None)
                return
            except kube.ApiException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create(self, namespace: str, names: list[str]) -> None:
        """Create the objects with `creator_threads` client threads."""
        def one(name: str) -> None:
            kube.create_object(self.api, self.kind.resource, self.kind.manifest(namespace, name))

        with ThreadPoolExecutor(max_workers=self.cfg.creator_threads, thread_name_prefix="create") as pool:
            list(pool.map(one, names))

    def processes(self) -> list[Proc]:
        """Every process measured: kubesim, the controllers, the worker (with its pool)."""
        return [self.kubesim, self.controller, *[p for p in self.others if p is not self.controller], self.worker]

    def close(self) -> None:
        """Stop everything, drop the database (unless --keep)."""
        for proc in [*self.others, self.controller, self.worker]:
            proc.stop()
        self.kubesim.stop()
        self.record.close()
        if not self.cfg.keep:
            try:
                drop_database(self.cfg.converge_config(), self.db_name)
            except Exception as exc:  # noqa: BLE001 - reported, the next N still runs
                self.log(f"could not drop {self.db_name}: {exc}")


def run_n(cfg: Config, label: str, root: Path, n: int, template: str, log: Log) -> dict[str, Any]:
    """Every figure of one N (see the package docstring); `error` names what failed, if anything did."""
    out: dict[str, Any] = {"tree": label, "root": str(root), "n": n, "kind": cfg.kind, "workers": cfg.workers,
                           "rest_seconds": cfg.rest_seconds, "error": ""}
    fleet: Fleet | None = None
    try:
        fleet = Fleet(cfg, label, root, n, template, log)
        out["run_dir"] = str(fleet.run_dir)
        _converge(fleet, out, log)
        _rest(fleet, out, log)
        operations.run_all(fleet, out, log)
    except Exception as exc:  # noqa: BLE001 - a failed N is reported, the others still run
        out["error"] = f"{type(exc).__name__}: {exc}"
        log(f"[{label} n={n}] failed: {out['error']}")
    finally:
        if fleet is not None:
            fleet.close()
    return out


def _converge(fleet: Fleet, out: dict[str, Any], log: Log) -> None:
    """Start the operator, warm it up, take the baseline, create N objects and wait until they are Running and the
    queue is idle."""
    cfg, rec, kind = fleet.cfg, fleet.record, fleet.kind.resource.kind
    tag = f"[{fleet.label} n={fleet.n}]"
    fleet.install()
    fleet.controller.start()
    fleet.worker.start()
    fleet.create(WARMUP_NS, [f"warm-{i}" for i in range(3)])
    if not rec.wait_running(WARMUP_NS, kind, 3, cfg.startup_timeout):
        raise RuntimeError(f"the warm-up objects are not Running after {cfg.startup_timeout:g} s\n"
                           f"{fleet.controller.log()}\n{fleet.worker.log()}")
    rec.wait_quiet(cfg.quiet_seconds, 60)
    fleet.baseline = snapshot(fleet.processes())
    fleet.redis0 = redis_bytes(cfg.redis_url)
    fleet.pg0 = rec.size()
    log(f"{tag} creating {fleet.n} {kind}s")
    t0 = time.time()
    fleet.create(NAMESPACE, [f"s-{i:05d}" for i in range(fleet.n)])
    out["create_seconds"] = time.time() - t0
    if not rec.wait_running(NAMESPACE, kind, fleet.n, cfg.timeout):
        raise RuntimeError(f"only {rec.running(NAMESPACE, kind)}/{fleet.n} Running after {cfg.timeout:g} s")
    out["converge_seconds"] = time.time() - t0
    last = rec.wait_quiet(cfg.quiet_seconds, cfg.timeout)
    out["idle_after_seconds"] = last - t0
    out["converge_runs"] = rec.runs_since(t0)
    log(f"{tag} {fleet.n} Running after {out['converge_seconds']:.1f} s, queue idle after "
        f"{out['idle_after_seconds']:.1f} s ({out['converge_runs']} runs)")


def _rest(fleet: Fleet, out: dict[str, Any], log: Log) -> None:
    """The rest window: CPU per group, reconciles, API requests; then memory, Redis and PostgreSQL per object."""
    cfg, n = fleet.cfg, fleet.n
    log(f"[{fleet.label} n={n}] at rest for {cfg.rest_seconds:g} s")
    out["loadavg_before_rest"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    stats0, busy0 = _kubesim_stats(fleet.kubesim_url, fleet.token), machine_busy_seconds()
    t0, s0 = time.time(), snapshot(fleet.processes())
    time.sleep(cfg.rest_seconds)
    t1, s1 = time.time(), snapshot(fleet.processes())
    busy1, stats1 = machine_busy_seconds(), _kubesim_stats(fleet.kubesim_url, fleet.token)
    window = t1 - t0
    out["rest_window_seconds"] = window
    out["machine_busy_percent"] = (busy1 - busy0) / window * 100
    cpu = cpu_by_group(s0, s1)
    out["cpu_seconds"] = {g: cpu.get(g, 0.0) for g in GROUPS}
    out["cpu_percent"] = {g: cpu.get(g, 0.0) / window * 100 for g in GROUPS}
    out["rest_runs"] = fleet.record.runs_since(t0, t1)
    req0, req1 = stats0.get("requests", {}), stats1.get("requests", {})
    out["rest_api_requests"] = sum(v - req0.get(k, 0) for k, v in req1.items())
    mem0, mem1 = memory_by_group(fleet.baseline), memory_by_group(s1)
    out["rss_mib"] = {g: mem1.get(g, (0, 0))[0] / 1024 for g in GROUPS}
    out["pss_mib"] = {g: mem1.get(g, (0, 0))[1] / 1024 for g in GROUPS}
    out["rss_kb_per_object"] = {g: (mem1.get(g, (0, 0))[0] - mem0.get(g, (0, 0))[0]) / n for g in GROUPS}
    out["pss_kb_per_object"] = {g: (mem1.get(g, (0, 0))[1] - mem0.get(g, (0, 0))[1]) / n for g in GROUPS}
    out["processes"] = [vars(s) for s in s1.values()]
    ours, server = redis_bytes(cfg.redis_url)
    out["redis_db_bytes_per_object"] = (ours - fleet.redis0[0]) / n
    out["redis_server_bytes_per_object"] = (server - fleet.redis0[1]) / n
    out["pg_bytes_per_object"] = (fleet.record.size() - fleet.pg0) / n
    log(f"[{fleet.label} n={n}] rest: CPU % {out['cpu_percent']}, {out['rest_runs']} runs, "
        f"KB/object {out['rss_kb_per_object']}")
