"""`python -m bench.converge` end to end at a tiny N: opsconsole with one worker and the kopf operator both
converge on their own kubesim, and the report carries every figure (throughput, latencies, CPU, peak RSS,
the ratio). Real processes: kubesim, runcontroller, a prefork Celery worker, kopf; PostgreSQL and Redis."""

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
    cmd = [sys.executable, "-m", "bench.converge", "--n", "5", "--scenarios", "opsconsole-1,kopf",
           "--steady-rate", "5", "--steady-seconds", "1", "--timeout", "30", "--startup-timeout", "40",
           "--pg-url", postgres_admin_url(), "--db-prefix", prefix, "--redis-url", settings.REDIS_URL,
           "--data-dir", str(tmp_path / "runs"), "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]

    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"opsconsole-1", "kopf"}
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
    assert leftover_databases(prefix) == []  # the scenario and template databases are dropped
