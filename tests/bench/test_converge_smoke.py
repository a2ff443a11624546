"""`python -m bench.converge --clusters 2` end to end at a tiny N: opsconsole with one worker and the kopf operator
both converge on their own kubesim, opsconsole also over two clusters (two kubesims, two controllers, the same
worker), and the report carries every figure (throughput, latencies, CPU, peak RSS, the ratios; per cluster and
against the single-cluster run). Real processes: kubesim, runcontroller, a prefork Celery worker, kopf; PostgreSQL
and Redis. One invocation for both, so the migrated template and the single-cluster run are shared."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = [pytest.mark.integration, pytest.mark.long_unit]

ROOT = Path(__file__).resolve().parent.parent.parent


def postgres_admin_url() -> str:
    """An admin connection to the suite's PostgreSQL (the bench creates and drops its own databases)."""
    db = settings.DATABASES["default"]
    if "postgresql" not in db["ENGINE"]:
        return "postgres://postgres@127.0.0.1:5432/postgres"
    auth = db.get("USER") or "postgres"
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/postgres"


def leftover_databases(prefix: str) -> list[str]:
    import psycopg

    with psycopg.connect(postgres_admin_url()) as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",)).fetchall()
    return [r[0] for r in rows]


def test_the_benchmark_converges_opsconsole_and_kopf_at_n_5_and_reports_every_figure(tmp_path):
    prefix = f"bench_smoke_{uuid.uuid4().hex[:8]}"
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "bench.converge", "--n", "5", "--scenarios", "opsconsole-1,kopf", "--clusters", "2",
           "--steady-rate", "5", "--steady-seconds", "1", "--timeout", "30", "--startup-timeout", "40",
           "--pg-url", postgres_admin_url(), "--db-prefix", prefix, "--redis-url", settings.REDIS_URL,
           "--data-dir", str(tmp_path / "runs"), "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]

    doc = json.loads(out.read_text())
    assert [r["name"] for r in doc["results"]] == ["opsconsole-1", "opsconsole-1@2", "kopf"]
    results = {r["name"]: r for r in doc["results"]}
    multi = results.pop("opsconsole-1@2")
    for name, r in results.items():
        assert r["error"] == "", name
        burst = r["burst"]
        assert burst["converged"] and burst["running"] == 5, name
        assert burst["reconciles"] >= 5 and burst["errors"] == 0, name
        assert 0 < burst["seconds"] < 30 and burst["crs_per_second"] > 0, name
        assert math.isfinite(burst["start_p50_ms"]) and burst["start_p99_ms"] >= burst["start_p50_ms"], name
        assert 0 < burst["running_p50_s"] <= burst["running_p99_s"], name
        steady = r["steady"]
        assert steady["crs"] == 5 and steady["converged"] and math.isfinite(steady["start_p99_ms"]), name
        procs = {p["name"]: p for p in r["procs"]}
        assert all(p["peak_rss_mb"] > 10 for p in procs.values()), name
        assert procs["kubesim"]["cpu_seconds"] > 0, name
        assert r["machine_busy_seconds"] > 0 and r["window_seconds"] > 0, name
    ops = {p["name"]: p for p in results["opsconsole-1"]["procs"]}
    assert {"controller", "celery worker", "celery worker child 1"} <= set(ops)
    assert ops["celery worker child 1"]["cpu_seconds"] > 0 and ops["controller"]["cpu_seconds"] > 0
    assert next(p for p in results["kopf"]["procs"] if p["name"] == "kopf")["cpu_seconds"] > 0

    report = proc.stdout
    assert "| opsconsole-1 |" in report and "| kopf |" in report
    assert "opsconsole-1 / kopf: converge throughput (CRs/s) ×" in report
    # the cost per CR, also as a multiple of kubesim's CPU in the same run (what does not move with the machine)
    assert "| operator + PostgreSQL + Redis CPU ms / CR | ÷ kubesim CPU |" in report
    ops_row = next(line for line in report.splitlines() if line.startswith("| opsconsole-1 | 10 |"))
    assert all(cell.strip() not in ("", "—") for cell in ops_row.split("|")[1:-1]), ops_row
    assert results["opsconsole-1"]["resources_by_cluster"] == {"default": 13}  # warm-up, burst and steady CRs
    single = results["opsconsole-1"]
    assert single["per_cluster"] == [] and single["burst_operator_cpu"] > 0 and single["burst_kubesim_cpu"] > 0

    # two clusters: N CRs in each, each converged and recorded as its own cluster's; no steady phase
    assert multi["error"] == "" and multi["clusters"] == 2 and multi["steady"] is None
    assert multi["burst"]["converged"] and multi["burst"]["crs"] == 10 and multi["burst"]["running"] == 10
    assert [c["cluster"] for c in multi["per_cluster"]] == ["default", "bench-2"]
    for c in multi["per_cluster"]:
        burst = c["burst"]
        assert burst["converged"] and burst["crs"] == 5 and burst["running"] == 5, c
        assert burst["reconciles"] >= 5 and burst["errors"] == 0, c
        assert 0 < burst["seconds"] <= multi["burst"]["seconds"] and burst["crs_per_second"] > 0, c
        assert c["api_requests"] > 0 and c["api_writes"] > 0, c
    assert multi["resources_by_cluster"] == {"bench-2": 8, "default": 8}  # 3 warm-up + 5 burst CRs in each
    mprocs = {p["name"]: p for p in multi["procs"]}
    assert {"kubesim", "kubesim bench-2", "controller", "controller bench-2", "celery worker"} <= set(mprocs)
    assert mprocs["controller bench-2"]["cpu_seconds"] > 0 and mprocs["kubesim bench-2"]["cpu_seconds"] > 0
    assert multi["burst_operator_cpu"] > 0 and multi["burst_kubesim_cpu"] > 0

    assert "2 clusters (N in each)" in report
    table = report.split("| scenario | clusters | N per cluster | cluster |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| opsconsole-1")]
    by_cluster = {(line.split("|")[1].strip(), line.split("|")[4].strip()): line for line in rows}
    assert set(by_cluster) == {("opsconsole-1", "default"), ("opsconsole-1@2", "default"),
                               ("opsconsole-1@2", "bench-2"), ("opsconsole-1@2", "all (10 CRs)")}, rows
    for cells in ([c.strip() for c in line.split("|")[1:-1]] for line in rows):
        assert float(cells[5]) > 0 and float(cells[6]) > 0, cells  # CRs/s and its ratio to single-cluster
    for key in (("opsconsole-1", "default"), ("opsconsole-1@2", "all (10 CRs)")):
        cells = [c.strip() for c in by_cluster[key].split("|")[1:-1]]
        # operator CPU ms / CR and its ratio; the same CPU ÷ kubesim's and its ratio
        assert all(float(cells[i]) > 0 for i in (7, 8, 9, 10)), cells
    assert "opsconsole-1@2 (1 runs) against opsconsole-1 (1 runs" in report
    assert "per-cluster rate ≥ 0.9× single-cluster:" in report
    assert "operator CPU (controllers + workers) per CR not above single-cluster:" in report
    assert "÷ kubesim's CPU, which does not move with the machine's speed: ×" in report
    assert leftover_databases(prefix) == []  # the scenario and template databases are dropped

