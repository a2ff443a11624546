"""docs/operations.md keeps up with what it documents: every alert rule and every deploy/k8s file."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def test_every_alert_has_a_section_saying_what_it_means_and_the_first_response() -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    for alert in alerts:
        match = re.search(rf"^### {alert}\b.*?\n(.*?)(?=^### |^## |\Z)", DOC, re.S | re.M)
        assert match, f"docs/operations.md has no section for {alert}"
        assert "First response" in match.group(1), alert


def test_every_manifest_file_is_listed() -> None:
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        assert f"`{path.name}`" in DOC, path.name
