"""Issue 42: the phase SLO's recording and burn-rate rules (deploy/prometheus/alerts.yml) evaluated by promtool on
a synthetic opsconsole_phase_seconds: departures all within 5 minutes page nobody; a third of them slower makes
the fast burn fire (14.4 × a 1 % budget, over 1 h and 5 m), and the slow-ratio recording rule says a third."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from reconcilers.engine import metrics

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
FAST_RATIO = 'opsconsole:phase_seconds_slow:ratio_rate1h{kind="Fast",phase="Pending"}'


def series(kind: str, le: str, per_minute: int) -> dict:
    name = "opsconsole_phase_seconds_count" if le == "count" else "opsconsole_phase_seconds_bucket"
    labels = f'kind="{kind}",phase="Pending"' + ("" if le == "count" else f',le="{le}"')
    return {"series": f"{name}{{{labels}}}", "values": f"0+{per_minute}x120"}


def test_the_burn_rate_rules_fire_on_slow_departures_and_not_on_fast_ones(tmp_path):
    assert 300 in metrics.TIME_IN_PHASE_BUCKETS  # the rules' bucket is one the histogram has
    cases = {
        "input_series": [
            # Fast: every departure within 5 minutes. Slow: 2 of 3 within.
            series("Fast", "300.0", 6), series("Fast", "count", 6),
            series("Slow", "300.0", 4), series("Slow", "count", 6),
        ],
        "interval": "1m",
        "alert_rule_test": [{"eval_time": "100m", "alertname": "OpsconsolePhaseSLOFastBurn", "exp_alerts": [{
            "exp_labels": {"severity": "critical", "kind": "Slow", "phase": "Pending"},
            "exp_annotations": {"summary": "Slow objects leave Pending too slowly: the 5-minute objective's "
                                           "budget burns fast"}}]}],
        "promql_expr_test": [{"expr": 'round(opsconsole:phase_seconds_slow:ratio_rate1h{kind="Slow"}, 0.001)',
                              "eval_time": "100m",
                              "exp_samples": [{"labels": '{kind="Slow",phase="Pending"}', "value": 0.333}]},
                             {"expr": 'opsconsole:phase_seconds_slow:ratio_rate1h{kind="Fast"}', "eval_time": "100m",
                              "exp_samples": [{"labels": FAST_RATIO, "value": 0}]}],
    }
    test_file = tmp_path / "slo_test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(RULES)], "evaluation_interval": "1m",
                                         "tests": [cases]}))
    done = subprocess.run(["promtool", "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
