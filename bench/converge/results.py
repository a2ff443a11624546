"""The benchmark's configuration (the CLI's options) and its results: per process, per phase, per cluster and per
scenario (what the report renders and `--json` writes)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
    #: `--clusters C`: each opsconsole scenario also runs over C clusters (`opsconsole-K@C`, bench.converge.clusters)
    clusters: int = 1


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
class ClusterResult:
    """One cluster's burst in a scenario over several clusters: its N CRs, timed from the common first create."""

    cluster: str
    burst: PhaseResult
    api_writes: int = 0
    api_requests: int = 0


@dataclass
class ScenarioResult:
    name: str
    n: int  # CRs in the burst per cluster
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
    clusters: int = 1  # the clusters the scenario ran over (`opsconsole-K@C`); `burst` covers them all
    per_cluster: list[ClusterResult] = field(default_factory=list)  # each cluster's burst (more than one cluster)
    #: the operator's CPU seconds (controllers + workers) over the burst until it went quiet (no steady phase):
    #: what `--clusters` compares per CR
    burst_operator_cpu: float = 0.0
    #: every kubesim's CPU seconds over the same span: the same work in every run of a scenario per CR, so the
    #: operator's CPU ÷ it does not move with how fast the (shared) machine ran then (`report._cost`)
    burst_kubesim_cpu: float = 0.0
    #: opsconsole: the Resource rows on record at the end, by cluster (each cluster's CRs were recorded as its own)
    resources_by_cluster: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.label = self.label or self.name

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for phase in ("burst", "steady"):
            p = getattr(self, phase)
            if p is not None:
                d[phase]["crs_per_second"] = p.crs_per_second
                d[phase]["reconciles_per_second"] = p.reconciles_per_second
        for c, r in zip(d["per_cluster"], self.per_cluster, strict=True):
            c["burst"]["crs_per_second"] = r.burst.crs_per_second
            c["burst"]["reconciles_per_second"] = r.burst.reconciles_per_second
        return d

