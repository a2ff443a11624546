"""OpsconsoleRolloutBlocked (deploy/prometheus/alerts.yml) under `promtool test rules`: it fires once a kind has had a
resource in Blocked for 5 minutes, names the kind, and stays quiet for a block that cleared sooner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

RULES = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "alerts.yml"


def test_rollout_blocked_fires_after_five_minutes_blocked_and_not_for_a_short_block(tmp_path):
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": 'opsconsole_resources{kind="KVStore",phase="Blocked"}', "values": "0 1 1 1 1 1 1 1 1"},
                {"series": 'opsconsole_resources{kind="Memcached",phase="Blocked"}', "values": "0 1 1 0 0 0 0 0 0"},
            ],
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "OpsconsoleRolloutBlocked", "exp_alerts": []},
                {"eval_time": "8m", "alertname": "OpsconsoleRolloutBlocked", "exp_alerts": [{
                    "exp_labels": {"kind": "KVStore", "severity": "warning"},
                    "exp_annotations": {"summary": "1 KVStore upgrades are blocked (budget, spread or progress "
                                                   "deadline)"}}]},
            ],
        }],
    }
    path = tmp_path / "rollout_blocked_test.yml"
    path.write_text(yaml.safe_dump(tests))
    run = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout
