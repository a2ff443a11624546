"""The benchmark's tables (Markdown) and the verdict against the issues' goals (19: against kopf; 41: several
clusters against one)."""

from __future__ import annotations

import math

from .results import Config, ScenarioResult

GOAL_RATIO = 1.0  # issue 19: at least kopf's converge throughput with 2 workers
GOAL_COST_MS = 25.0  # issue 19: operator + PostgreSQL + Redis CPU per converged CR
GOAL_P99_MS = 100.0


def _f(value: float, digits: int = 1) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def results_table(results: list[ScenarioResult]) -> str:
    """One row per scenario: burst convergence and throughput, latencies, steady-phase latency."""
    head = ("| scenario | burst: all Running after (s) | CRs/s | reconciles | reconciles/s | errors "
            "| burst create→reconcile start p50 / p99 (ms) | burst create→Running p50 / p99 (s) "
            "| mean reconcile (ms) | steady create→reconcile start p50 / p99 / max (ms) |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        if r.burst is None:
            rows.append(f"| {r.label} | failed: {r.error[:120]} | | | | | | | | |")
            continue
        b = r.burst
        conv = _f(b.seconds) if b.converged else f"not converged ({b.running}/{b.crs} in {b.seconds:.0f} s)"
        steady = "—"
        if r.steady is not None:
            s = r.steady
            steady = f"{_f(s.start_p50_ms)} / {_f(s.start_p99_ms)} / {_f(s.start_max_ms)}"
            steady += (f" ({s.crs} CRs at {s.rate:g}/s, started {r.quiet_after_seconds:.1f} s after the burst"
                       + ("" if s.converged else ", not converged") + ")")
        rows.append(f"| {r.label} | {conv} | {_f(b.crs_per_second)} | {b.reconciles} | {_f(b.reconciles_per_second)} "
                    f"| {b.errors} | {_f(b.start_p50_ms, 0)} / {_f(b.start_p99_ms, 0)} "
                    f"| {_f(b.running_p50_s, 2)} / {_f(b.running_p99_s, 2)} | {_f(b.mean_reconcile_ms)} | {steady} |")
    return "\n".join(rows)


def procs_table(results: list[ScenarioResult]) -> str:
    """CPU seconds (burst + steady phase) and peak RSS per process."""
    rows = ["| scenario | process | CPU (s) | peak RSS (MB) |", "|---|---|---|---|"]
    for r in results:
        for p in r.procs:
            rows.append(f"| {r.label} | {p.name} | {_f(p.cpu_seconds, 2)} | {_f(p.peak_rss_mb, 0)} |")
        operator = [p for p in r.procs if not p.name.startswith(("kubesim", "bench"))]
        if operator:
            rows.append(f"| {r.label} | **operator total** | **{_f(sum(p.cpu_seconds for p in operator), 2)}** "
                        f"| **{_f(sum(p.peak_rss_mb for p in operator), 0)}** |")
        for p in r.servers:
            rows.append(f"| {r.label} | {p.name} | {_f(p.cpu_seconds, 2)} | — |")
        if r.window_seconds:
            listed = sum(p.cpu_seconds for p in r.procs) + sum(p.cpu_seconds for p in r.servers)
            rows.append(f"| {r.label} | machine: all CPUs busy over the {_f(r.window_seconds)} s measured "
                        f"(load avg before: {r.loadavg_before}) | {_f(r.machine_busy_seconds, 2)} | — |")
            rows.append(f"| {r.label} | other processes (machine − rows above) "
                        f"| {_f(r.machine_busy_seconds - listed, 2)} | — |")
    return "\n".join(rows)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _crs(r: ScenarioResult) -> int:
    """The CRs a run converged (burst + steady phase): what its CPU figures are divided by."""
    return (r.burst.crs if r.burst else 0) + (r.steady.crs if r.steady else 0)


def _operator_cpu(r: ScenarioResult) -> float:
    """The operator's own processes' CPU seconds (not kubesim's, not the bench's)."""
    return sum(p.cpu_seconds for p in r.procs if not p.name.startswith(("kubesim", "bench")))


def _cost(r: ScenarioResult) -> tuple[float, float]:
    """(operator + PostgreSQL + Redis CPU ms per converged CR, the same CPU ÷ kubesim's CPU in the run). The
    second does not move with the machine's speed: kubesim does the same work in every run of a scenario, so its
    CPU measures how fast the machine ran then (on a machine 30 % slower both grow by 30 % and their ratio
    stays)."""
    crs = _crs(r)
    cpu = _operator_cpu(r) + sum(p.cpu_seconds for p in r.servers)
    kubesim = sum(p.cpu_seconds for p in r.procs if p.name.startswith("kubesim"))
    return (cpu / crs * 1000 if crs else math.nan), (cpu / kubesim if kubesim else math.nan)


def verdict(results: list[ScenarioResult]) -> str:
    """The ratios against kopf (means over repeated runs of a scenario) and whether the goals hold."""
    by: dict[str, list[ScenarioResult]] = {}
    for r in results:
        if r.burst is not None and r.burst.converged:
            by.setdefault(r.name, []).append(r)

    def crs(name: str) -> float:
        return _mean([r.burst.crs_per_second for r in by.get(name, []) if r.burst])

    def recs(name: str) -> float:
        return _mean([r.burst.reconciles_per_second for r in by.get(name, []) if r.burst])

    lines = []
    runs = {name: len(rs) for name, rs in by.items()}
    if any(n > 1 for n in runs.values()):
        lines.append("- means over " + ", ".join(f"{n} runs of {name}" for name, n in sorted(runs.items())))
    if "kopf" in by:
        for name in sorted(n for n in by if n.startswith("opsconsole-") and "@" not in n):  # one cluster, as kopf
            lines.append(f"- {name} / kopf: converge throughput (CRs/s) × {_f(crs(name) / crs('kopf'), 2)}, "
                         f"reconciles/s × {_f(recs(name) / recs('kopf'), 2)}")
        if "opsconsole-2" in by:
            ratio = crs("opsconsole-2") / crs("kopf")
            met = "met" if ratio >= GOAL_RATIO else "NOT met"
            lines.append(f"- goal ≥ {GOAL_RATIO}× kopf's throughput with 2 workers: {met} (× {_f(ratio, 3)})")
    costs = [_cost(r) for r in by.get("opsconsole-2", [])]
    if costs:
        ms = _mean([c[0] for c in costs])
        met = "met" if ms <= GOAL_COST_MS else "NOT met"
        lines.append(f"- goal operator + PostgreSQL + Redis CPU ≤ {GOAL_COST_MS:g} ms per CR (opsconsole-2, mean): "
                     f"{met} ({_f(ms)} ms; {_f(_mean([c[1] for c in costs]), 2)} × kubesim's CPU)")
    steady = [r.steady for r in by.get("opsconsole-2", []) if r.steady is not None]
    if steady:
        p99 = max(s.start_p99_ms for s in steady)
        met = "met" if p99 < GOAL_P99_MS else "NOT met"
        lines.append(f"- goal p99 create→reconcile start < {GOAL_P99_MS:g} ms at steady load (opsconsole-2, "
                     f"{steady[0].rate:g} CRs/s; worst run): {met} ({_f(p99)} ms)")
    return "\n".join(lines)


def work_table(results: list[ScenarioResult]) -> str:
    """Work per converged CR, independent of how loaded the machine was: API requests (every one kubesim served,
    the bench's creates and watch included), API writes (kubesim's resourceVersion increase, which includes
    kubesim's own Deployment/ReplicaSet/Pod writes), database commits (opsconsole), reconciles, operator CPU, and
    operator + PostgreSQL + Redis CPU (the servers' CPU may include other users'), also as a multiple of kubesim's
    CPU in the same run, which does not move with the machine's speed (`_cost`)."""
    rows = ["| scenario | CRs | reconciles / CR | API requests / CR | API writes / CR | DB commits / reconcile "
            "| operator CPU ms / CR | operator + PostgreSQL + Redis CPU ms / CR | ÷ kubesim CPU |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        crs = _crs(r)
        if not crs or r.burst is None:
            continue
        reconciles = r.burst.reconciles + (r.steady.reconciles if r.steady else 0)
        commits = _f(r.db_commits / reconciles, 1) if r.db_commits and reconciles else "—"
        requests = sum(r.api_requests.values())
        ms, relative = _cost(r)
        rows.append(f"| {r.label} | {crs} | {_f(reconciles / crs, 2)} | {_f(requests / crs, 1)} "
                    f"| {_f(r.api_writes / crs, 1)} | {commits} | {_f(_operator_cpu(r) / crs * 1000, 0)} "
                    f"| {_f(ms, 1)} | {_f(relative, 2)} |")
    return "\n".join(rows)


def requests_table(results: list[ScenarioResult]) -> str:
    """The API requests per converged CR by type (`verb resource[/subresource]`), one column per scenario."""
    shown = [r for r in results if r.api_requests and r.burst is not None]
    if not shown:
        return ""
    crs = {r.label: (r.burst.crs if r.burst else 0) + (r.steady.crs if r.steady else 0) for r in shown}
    kinds = sorted({k for r in shown for k in r.api_requests}, key=lambda k: -max(r.api_requests.get(k, 0)
                                                                                  for r in shown))
    rows = ["| API requests / CR | " + " | ".join(r.label for r in shown) + " |",
            "|---|" + "---:|" * len(shown)]
    for kind in kinds:
        rows.append(f"| {kind} | " + " | ".join(_f(r.api_requests.get(kind, 0) / crs[r.label], 2) if crs[r.label]
                                                 else "—" for r in shown) + " |")
    return "\n".join(rows)


GOAL_CLUSTER_RATE = 0.9  # issue 41: each cluster converges at ≥ 0.9× the single-cluster rate
GOAL_CLUSTER_COST = 1.0  # issue 41: operator CPU per CR not higher than single-cluster


def _single(results: list[ScenarioResult], r: ScenarioResult) -> list[ScenarioResult]:
    """The converged single-cluster runs of `r`'s operator and worker count (`opsconsole-K` for `opsconsole-K@C`)."""
    base = r.name.split("@", 1)[0]
    return [s for s in results if s.name == base and s.burst is not None and s.burst.converged]


def _cpu_ms(r: ScenarioResult) -> float:
    """The operator's CPU (controllers + workers) ms per CR over the burst and its tail (no steady phase)."""
    crs = r.burst.crs if r.burst else 0
    return r.burst_operator_cpu / crs * 1000 if crs and r.burst_operator_cpu else math.nan


def _cpu_rel(r: ScenarioResult) -> float:
    """The same CPU ÷ the kubesims' CPU over the same span (what does not move with the machine's speed)."""
    return r.burst_operator_cpu / r.burst_kubesim_cpu if r.burst_operator_cpu and r.burst_kubesim_cpu else math.nan


def clusters_table(results: list[ScenarioResult]) -> str:
    """With runs over several clusters: per cluster, the time to all Running and CRs/s against the single-cluster
    runs' mean rate, and the operator CPU (controllers + workers) per CR over the burst until quiet against theirs."""
    if not any(r.clusters > 1 for r in results):
        return ""
    rows = ["| scenario | clusters | N per cluster | cluster | all Running after (s) | CRs/s | × single-cluster CRs/s "
            "| operator CPU ms / CR (burst) | × single-cluster | operator CPU ÷ kubesim CPU | × single-cluster |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if r.burst is None or not r.name.startswith("opsconsole-"):
            continue
        single = _single(results, r)
        rate = _mean([s.burst.crs_per_second for s in single if s.burst])
        cost = _mean([_cpu_ms(s) for s in single])
        rel = _mean([_cpu_rel(s) for s in single])
        parts = [(c.cluster, c.burst) for c in r.per_cluster] or [("default", r.burst)]
        whole = r.clusters == 1  # one cluster: its row carries the run's CPU (else the 'all' row below does)
        for cluster, b in parts:
            conv = _f(b.seconds) if b.converged else f"not converged ({b.running}/{b.crs})"
            rows.append(f"| {r.label} | {r.clusters} | {r.n} | {cluster} | {conv} | {_f(b.crs_per_second)} "
                        f"| {_f(b.crs_per_second / rate, 2)} | {_f(_cpu_ms(r), 0) if whole else ''} "
                        f"| {_f(_cpu_ms(r) / cost, 2) if whole else ''} | {_f(_cpu_rel(r), 2) if whole else ''} "
                        f"| {_f(_cpu_rel(r) / rel, 2) if whole else ''} |")
        if r.clusters > 1:
            b = r.burst
            rows.append(f"| {r.label} | {r.clusters} | {r.n} | all ({b.crs} CRs) | {_f(b.seconds)} "
                        f"| {_f(b.crs_per_second)} | {_f(b.crs_per_second / rate, 2)} | {_f(_cpu_ms(r), 0)} "
                        f"| {_f(_cpu_ms(r) / cost, 2)} | {_f(_cpu_rel(r), 2)} | {_f(_cpu_rel(r) / rel, 2)} |")
    return "\n".join(rows)


def clusters_verdict(results: list[ScenarioResult]) -> str:
    """Issue 41's goals, per multi-cluster scenario: each cluster's mean rate ≥ 0.9× the single-cluster runs' mean,
    and the mean operator CPU per CR not above theirs."""
    lines = []
    for name in sorted({r.name for r in results if r.clusters > 1}):
        multi = [r for r in results if r.name == name and r.burst is not None and r.burst.converged]
        single = _single(results, multi[0]) if multi else []
        if not multi or not single:
            lines.append(f"- {name}: no converged pair of runs to compare")
            continue
        rate = _mean([s.burst.crs_per_second for s in single if s.burst])
        per: dict[str, list[float]] = {}
        for r in multi:
            for c in r.per_cluster:
                per.setdefault(c.cluster, []).append(c.burst.crs_per_second)
        ratios = {c: _mean(v) / rate for c, v in per.items()}
        worst = min(ratios.values())
        met = "met" if round(worst, 2) >= GOAL_CLUSTER_RATE else "NOT met"  # as printed
        lines.append(f"- {name} ({len(multi)} runs) against {single[0].name} ({len(single)} runs, "
                     f"{_f(rate)} CRs/s): per-cluster rate ≥ {GOAL_CLUSTER_RATE:g}× single-cluster: {met} ("
                     + ", ".join(f"{c} × {_f(v, 2)}" for c, v in ratios.items()) + ")")
        cost = _mean([_cpu_ms(r) for r in multi]) / _mean([_cpu_ms(s) for s in single])
        met = "met" if round(cost, 2) <= GOAL_CLUSTER_COST else "NOT met"  # as printed
        rel = _mean([_cpu_rel(r) for r in multi]) / _mean([_cpu_rel(s) for s in single])
        lines.append(f"- {name}: operator CPU (controllers + workers) per CR not above single-cluster: {met} "
                     f"(× {_f(cost, 2)}: {_f(_mean([_cpu_ms(r) for r in multi]), 1)} against "
                     f"{_f(_mean([_cpu_ms(s) for s in single]), 1)} ms; ÷ kubesim's CPU, which does not move with "
                     f"the machine's speed: × {_f(rel, 2)})")
    return "\n".join(lines)


def settings_line(cfg: Config) -> str:
    return (f"N={cfg.n} (spec.size={cfg.size}), kubesim kubelet delays schedule/start/ready = "
            f"{cfg.schedule_delay:g}/{cfg.start_delay:g}/{cfg.ready_delay:g} s, {cfg.creator_threads} creating "
            f"threads, steady phase {cfg.steady_rate:g} CRs/s for {cfg.steady_seconds:g} s, timeout {cfg.timeout:g} s"
            + (f", opsconsole env {cfg.opsconsole_env}" if cfg.opsconsole_env else "")
            + (f", {cfg.clusters} clusters (N in each)" if cfg.clusters > 1 else ""))


def render(cfg: Config, results: list[ScenarioResult]) -> str:
    parts = [settings_line(cfg), results_table(results), procs_table(results), work_table(results),
             requests_table(results), clusters_table(results), verdict(results), clusters_verdict(results)]
    return "\n\n".join(part for part in parts if part) + "\n"
