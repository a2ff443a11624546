"""`python -m bench.scale` end to end at N=20 with a 2 s rest window: every figure of the curve is in the JSON and
in both printed tables, the chart is written and the bench's databases are dropped. Real processes: kubesim,
runcontroller (restarted, then a standby that takes over), a prefork Celery worker; PostgreSQL and Redis. The Lease
is short (3 s) so that the failover does not wait the default 15 s."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import uuid

import pytest
from django.conf import settings

from tests.bench.test_converge_smoke import ROOT, leftover_databases, postgres_admin_url

pytestmark = [pytest.mark.integration, pytest.mark.long_unit]

SHORT_LEASE = ["OPSCONSOLE_LEADER_LEASE_SECONDS=3", "OPSCONSOLE_LEADER_RENEW_DEADLINE_SECONDS=2",
               "OPSCONSOLE_LEADER_RETRY_SECONDS=0.5"]


def test_the_scale_benchmark_measures_n_20_at_rest_and_reports_every_figure(tmp_path):
    prefix = f"bench_scale_smoke_{uuid.uuid4().hex[:8]}"
    out, png = tmp_path / "result.json", tmp_path / "scale.png"
    cmd = [sys.executable, "-m", "bench.scale", "--n", "20", "--rest-seconds", "2", "--workers", "1",
           "--quiet-seconds", "1", "--page-requests", "3", "--timeout", "60", "--startup-timeout", "40",
           "--pg-url", postgres_admin_url(), "--db-prefix", prefix, "--redis-url", settings.REDIS_URL,
           "--data-dir", str(tmp_path / "runs"), "--json", str(out), "--png", str(png),
           *[arg for env in SHORT_LEASE for arg in ("--opsconsole-env", env)]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]

    [r] = json.loads(out.read_text())["results"]
    assert r["error"] == "" and r["n"] == 20 and r["tree"] == "main"
    assert 0 < r["converge_seconds"] < 60 and r["converge_runs"] >= 20
    assert r["rest_window_seconds"] >= 2 and r["rest_runs"] >= 0
    for figure in ("cpu_percent", "rss_mib", "pss_mib", "rss_kb_per_object", "pss_kb_per_object"):
        assert set(r[figure]) == {"controller", "workers", "kubesim"}, figure
        assert all(math.isfinite(v) for v in r[figure].values()), figure
    assert all(v > 10 for v in r["rss_mib"].values())  # each group was found and read
    assert r["cpu_seconds"]["controller"] > 0  # the controller's loop runs at rest
    assert r["pg_bytes_per_object"] > 0 and r["redis_db_bytes_per_object"] != 0
    assert {p["name"] for p in r["processes"]} >= {"controller", "celery worker", "celery worker child 1", "kubesim"}
    for page in ("overview", "resources"):
        p50, p95 = r["pages"][page]
        assert 0 < p50 <= p95, page
    for name in ("django_setup", "audit_verify", "audit_checkpoint"):
        assert r["commands"][name]["rc"] == 0 and r["commands"][name]["seconds"] > 0, r["commands"][name]
    assert "audit trail intact" in r["commands"]["audit_verify"]["output"]
    for op in ("startup", "failover"):
        assert 0 < r[op]["probe_seconds"] <= r[op]["idle_after_seconds"] and r[op]["runs"] >= 1, r[op]

    rest_row, ops_row = [line for line in proc.stdout.splitlines() if line.startswith("| main | 20 |")]
    for row in (rest_row, ops_row):
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert len(cells) == 9 and all(c not in ("", "—") for c in cells), row
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert leftover_databases(prefix) == []
