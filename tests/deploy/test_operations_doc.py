"""docs/operations.md keeps up with what it documents: every alert rule, every file of the kustomize base and
overlays, and every top-level key of the Helm chart's values."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def test_every_alert_has_a_section_saying_what_it_means_and_the_first_response() -> None:
    alerts = [r["alert"] for name in ("alerts.yml", "slo.yml")  # slo.yml: generated from the kinds' objectives
              for g in yaml.safe_load((ROOT / "deploy" / "prometheus" / name).read_text(encoding="utf-8"))["groups"]
              for r in g["rules"] if "alert" in r]
    assert alerts
    for alert in alerts:
        match = re.search(rf"^### {alert}\b.*?\n(.*?)(?=^### |^## |\Z)", DOC, re.S | re.M)
        assert match, f"docs/operations.md has no section for {alert}"
        assert "First response" in match.group(1), alert


def test_every_kustomize_file_is_listed() -> None:
    paths = sorted((ROOT / "deploy" / "kustomize").rglob("*.yaml"))
    assert paths
    for path in paths:
        if path.name != "kustomization.yaml":
            assert f"`{path.name}`" in DOC, path.relative_to(ROOT)


def test_every_top_level_value_of_the_chart_is_in_the_settings_table() -> None:
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "opsconsole" / "values.yaml").read_text(encoding="utf-8"))
    match = re.search(r"^### Where each setting goes\n(.*?)(?=^## |^### |\Z)", DOC, re.S | re.M)
    assert match, "docs/operations.md has no section 'Where each setting goes'"
    for key in values:
        assert f"`{key}" in match.group(1), key
