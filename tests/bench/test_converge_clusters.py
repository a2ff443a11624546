"""bench.converge's `--clusters` without processes: the scenario names, their alternating expansion, and the
report's comparison of the multi-cluster runs with the single-cluster ones (rates per cluster, CPU per CR)."""

from __future__ import annotations

import pytest

from bench.converge.__main__ import parse_args
from bench.converge.clusters import cluster_name, expand_scenarios, parse_scenario
from bench.converge.report import clusters_table, clusters_verdict
from bench.converge.results import ClusterResult, PhaseResult, ScenarioResult


def test_scenario_names_say_the_operator_the_workers_and_the_clusters():
    assert parse_scenario("opsconsole-2") == ("opsconsole", 2, 1)
    assert parse_scenario("opsconsole-2@3") == ("opsconsole", 2, 3)
    assert parse_scenario("kopf") == ("kopf", 1, 1)
    for bad in ("opsconsole", "opsconsole-0", "opsconsole-2@0", "opsconsole-2@", "kopf@2", "other"):
        with pytest.raises(ValueError, match="unknown scenario"):
            parse_scenario(bad)
    assert [cluster_name(i) for i in range(3)] == ["default", "bench-2", "bench-3"]


def test_clusters_pair_each_opsconsole_scenario_alternately_and_leave_the_others():
    assert expand_scenarios(("opsconsole-2", "kopf"), 1) == ("opsconsole-2", "kopf")
    assert expand_scenarios(("opsconsole-2", "opsconsole-2"), 2) == (
        "opsconsole-2", "opsconsole-2@2", "opsconsole-2@2", "opsconsole-2")
    assert expand_scenarios(("opsconsole-1", "kopf", "opsconsole-1@3"), 2) == (
        "opsconsole-1", "opsconsole-1@2", "kopf", "opsconsole-1@3")
    with pytest.raises(ValueError, match="at least 1"):
        expand_scenarios(("opsconsole-2",), 0)
    with pytest.raises(ValueError, match="unknown scenario"):
        expand_scenarios(("opsconsole-x",), 2)


def test_the_cli_defaults_to_a_burst_only_opsconsole_2_pair_with_clusters():
    cfg, _ = parse_args(["--clusters", "2"])
    assert cfg.scenarios == ("opsconsole-2", "opsconsole-2@2") and cfg.clusters == 2 and cfg.steady_seconds == 0
    cfg, _ = parse_args([])
    assert cfg.clusters == 1 and cfg.steady_seconds > 0 and "kopf" in cfg.scenarios


def _burst(crs: int, seconds: float) -> PhaseResult:
    return PhaseResult(crs=crs, converged=True, running=crs, seconds=seconds, reconciles=2 * crs, errors=0,
                       start_p50_ms=1.0, start_p99_ms=2.0, start_max_ms=3.0, running_p50_s=1.0, running_p99_s=2.0,
                       mean_reconcile_ms=50.0)


def _single(label: str, seconds: float, cpu: float) -> ScenarioResult:
    return ScenarioResult("opsconsole-2", 100, label=label, burst=_burst(100, seconds), burst_operator_cpu=cpu,
                          burst_kubesim_cpu=cpu / 2)


def test_the_report_compares_each_cluster_with_the_single_cluster_runs_mean():
    singles = [_single("opsconsole-2 #1", 4.0, 2.0), _single("opsconsole-2 #2", 6.0, 2.4)]  # 25 and 16.7 CRs/s
    multi = ScenarioResult("opsconsole-2@2", 100, label="opsconsole-2@2", clusters=2, burst=_burst(200, 10.0),
                           per_cluster=[ClusterResult("default", _burst(100, 9.0)),
                                        ClusterResult("bench-2", _burst(100, 10.0))],
                           burst_operator_cpu=4.4, burst_kubesim_cpu=2.0)
    results = [singles[0], multi, singles[1]]
    rate = (25.0 + 100 / 6) / 2
    table = clusters_table(results)
    rows = {tuple(c.strip() for c in line.split("|")[1:5]): [c.strip() for c in line.split("|")[5:-1]]
            for line in table.splitlines()[2:]}
    assert rows[("opsconsole-2@2", "2", "100", "bench-2")][:3] == ["10.0", "10.0", f"{10 / rate:.2f}"]
    assert rows[("opsconsole-2@2", "2", "100", "bench-2")][3:] == ["", "", "", ""]  # the CPU is the run's
    whole = rows[("opsconsole-2@2", "2", "100", "all (200 CRs)")]
    assert whole[1] == "20.0" and whole[3] == "22" and whole[4] == f"{22 / 22:.2f}"  # 4.4 s / 200; singles 20, 24
    assert whole[5] == "2.20" and whole[6] == f"{2.2 / 2.0:.2f}"
    assert rows[("opsconsole-2 #1", "1", "100", "default")][3] == "20"

    verdict = clusters_verdict(results)
    assert "per-cluster rate ≥ 0.9× single-cluster: NOT met" in verdict
    assert f"default × {100 / 9 / rate:.2f}, bench-2 × {10 / rate:.2f}" in verdict
    assert "per CR not above single-cluster: met (× 1.00: 22.0 against 22.0 ms" in verdict
    assert "machine's speed: × 1.10" in verdict


def test_without_several_clusters_the_report_has_no_comparison_and_a_missing_pair_is_said():
    single = _single("opsconsole-2", 4.0, 2.0)
    assert clusters_table([single]) == "" and clusters_verdict([single]) == ""
    failed = ScenarioResult("opsconsole-2@2", 100, clusters=2, error="RuntimeError: x")
    assert clusters_verdict([failed]) == "- opsconsole-2@2: no converged pair of runs to compare"
