"""Issue 42: the phase SLO's recording and burn-rate rules, generated from the kinds' objectives
(reconcilers.engine.slo_rules, `manage.py slo_rules`, deploy/prometheus/slo.yml) and evaluated by promtool on a
synthetic opsconsole_phase_seconds: departures all within the bound page nobody; a third of them slower makes the
fast burn fire (14.4 × a 1 % budget, over 1 h and 5 m); a declared objective gets its own bucket and budget; an
objective the histogram cannot answer is refused naming the kind and the objective."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from django.core.management import CommandError, call_command

from reconcilers.core.objectives import PhaseObjective
from reconcilers.engine import metrics, registry, slo_rules

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "deploy" / "prometheus"
SLO = PROMETHEUS / "slo.yml"


def kind(name: str, *objectives: PhaseObjective, initial: str = "Pending") -> SimpleNamespace:
    """A stand-in reconciler: what the generator reads (the kind's name, its objectives, its initial phase)."""
    return SimpleNamespace(resource=SimpleNamespace(kind=name), objectives=objectives,
                           state_machine=SimpleNamespace(initial=initial))


def series(kind_name: str, phase: str, le: str, per_minute: int) -> dict:
    name = "opsconsole_phase_seconds_count" if le == "count" else "opsconsole_phase_seconds_bucket"
    labels = f'kind="{kind_name}",phase="{phase}"' + ("" if le == "count" else f',le="{le}"')
    return {"series": f"{name}{{{labels}}}", "values": f"0+{per_minute}x120"}


def promtool_test(tmp_path: Path, rules: Path, cases: dict) -> None:
    test_file = tmp_path / "slo_test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m",
                                         "tests": [{"interval": "1m", **cases}]}))
    done = subprocess.run(["promtool", "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_burn_rate_rules_fire_on_slow_departures_and_not_on_fast_ones(tmp_path: Path) -> None:
    rules = tmp_path / "slo.yml"
    rules.write_text(slo_rules.slo_rules_yaml([kind("Fast"), kind("Slow")]))  # both: the default objective
    slow = {"kind": "Slow", "phase": "Pending", "objective": "creation"}
    promtool_test(tmp_path, rules, {
        "input_series": [
            # Fast: every departure within 5 minutes. Slow: 2 of 3 within.
            series("Fast", "Pending", "300.0", 6), series("Fast", "Pending", "count", 6),
            series("Slow", "Pending", "300.0", 4), series("Slow", "Pending", "count", 6),
        ],
        "alert_rule_test": [{"eval_time": "100m", "alertname": "OpsconsolePhaseSLOFastBurn", "exp_alerts": [{
            "exp_labels": {"severity": "critical", **slow},
            "exp_annotations": {
                "summary": "Slow objects leave Pending too slowly: the 5-minute objective's budget burns fast",
                "description": "Objective 'creation': 99 % of Pending phases are left within 5 min. The error "
                               "budget (1 %) is spent 14.4 times too fast over 1h and 5m."}}]}],
        "promql_expr_test": [
            {"expr": 'round(opsconsole:phase_seconds_slow:ratio_rate1h{kind="Slow"}, 0.001)', "eval_time": "100m",
             "exp_samples": [{"labels": '{kind="Slow",objective="creation",phase="Pending"}', "value": 0.333}]},
            {"expr": 'opsconsole:phase_seconds_slow:ratio_rate1h{kind="Fast"}', "eval_time": "100m",
             "exp_samples": [{"labels": 'opsconsole:phase_seconds_slow:ratio_rate1h{kind="Fast",'
                                        'objective="creation",phase="Pending"}', "value": 0}]}],
    })


def test_a_declared_objective_gets_its_own_bucket_budget_and_labels(tmp_path: Path) -> None:
    """Syncing within 60 s, 95 %: the rules read le="60.0" and burn at 14.4 × 5 %; the 5-minute bucket (every
    departure within it) does not hide the slow ones, and the kind's default objective is not added."""
    declared = kind("Declared", PhaseObjective("Syncing", within_seconds=60, target=0.95, name="sync"))
    data = slo_rules.slo_rules([declared])
    assert [g["name"] for g in data["groups"]] == ["opsconsole-slo-declared-sync"]
    rules = tmp_path / "slo.yml"
    rules.write_text(slo_rules.slo_rules_yaml([declared]))
    promtool_test(tmp_path, rules, {
        "input_series": [series("Declared", "Syncing", "60.0", 1), series("Declared", "Syncing", "300.0", 6),
                         series("Declared", "Syncing", "count", 6)],
        "alert_rule_test": [{"eval_time": "100m", "alertname": "OpsconsolePhaseSLOFastBurn", "exp_alerts": [{
            "exp_labels": {"severity": "critical", "kind": "Declared", "phase": "Syncing", "objective": "sync"},
            "exp_annotations": {
                "summary": "Declared objects leave Syncing too slowly: the 1-minute objective's budget burns fast",
                "description": "Objective 'sync': 95 % of Syncing phases are left within 1 min. The error budget "
                               "(5 %) is spent 14.4 times too fast over 1h and 5m."}}]}],
    })


def test_an_objective_the_histogram_cannot_answer_is_refused_naming_the_kind_and_objective(monkeypatch) -> None:
    # the histogram's buckets lose 300 s (a drift between metrics and the objectives' bounds)
    monkeypatch.setattr(slo_rules, "TIME_IN_PHASE_BUCKETS", tuple(b for b in metrics.TIME_IN_PHASE_BUCKETS
                                                                  if b != 300))
    with pytest.raises(slo_rules.SloRulesError, match=r"^Odd: objective 'creation' \(Pending within 300 s\): 300 is "
                                                      "not a bucket of opsconsole_phase_seconds"):
        slo_rules.slo_rules([kind("Odd")])
    first = registry.registered()[0].resource.kind
    with pytest.raises(CommandError, match=rf"^{first}: objective 'creation'"):
        call_command("slo_rules")


def test_the_checked_in_rules_are_what_the_registered_kinds_generate_and_pass_promtool(tmp_path: Path) -> None:
    try:
        call_command("slo_rules", "--check", str(SLO))
    except CommandError as exc:
        pytest.fail(f"{exc}\n(`make generate` rewrites every generated file)")
    groups = yaml.safe_load(SLO.read_text(encoding="utf-8"))["groups"]
    assert {g["name"] for g in groups} == {f"opsconsole-slo-{r.resource.kind.lower()}-creation"
                                           for r in registry.registered()}
    done = subprocess.run(["promtool", "check", "rules", str(SLO), str(PROMETHEUS / "alerts.yml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    # the phase SLO is no longer hard-coded beside the other alerts
    assert "phase_seconds_slow" not in (PROMETHEUS / "alerts.yml").read_text(encoding="utf-8")
    stale = tmp_path / "slo.yml"
    stale.write_text(SLO.read_text(encoding="utf-8").replace('le="300.0"', 'le="600.0"'))
    with pytest.raises(CommandError, match="slo.yml is stale: regenerate it with `manage.py slo_rules`"):
        call_command("slo_rules", "--check", str(stale))
    with pytest.raises(CommandError, match="is missing"):
        call_command("slo_rules", "--check", str(tmp_path / "none.yml"))
