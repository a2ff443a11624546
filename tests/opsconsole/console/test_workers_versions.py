"""The workers page's "Operator versions" card: one row per version with its figures, the version with the higher
error rate named in text, the empty state with one version or none, and a viewer's namespace limit."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import ReconcileRun
from reconcilers.services import workers
from tests.opsconsole.api import factories as f
from tests.reconcilers.services.test_workers import FakeInspect


@pytest.fixture(autouse=True)
def no_workers(monkeypatch):
    """No Celery broadcast: the workers service reads a fake that answers nothing."""
    workers.workers_cache_clear()
    monkeypatch.setattr(workers, "_default_inspect", FakeInspect(None, None))
    yield
    workers.workers_cache_clear()


def run(res, version: str, *, result: str = "success", duration: float = 0.25) -> None:
    ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, duration_seconds=duration, result=result,
                                started_at=timezone.now() - timedelta(seconds=30), operator_version=version)


def card(html: str) -> str:
    match = re.search(r'<section class="card" id="operator-versions">(.*?)</section>', html, re.S)
    assert match, "no versions card"
    return match.group(1)


def version_row(html: str, version: str) -> str:
    match = re.search(rf'<tr class="version[^"]*" data-version="{re.escape(version)}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {version}"
    return match.group(1)


def test_two_versions_are_rows_and_the_one_with_more_errors_is_named(as_role):
    res = f.resource("a")
    for _ in range(3):
        run(res, "opsconsole 1.0.0")
    run(res, "canary-1.1", result="error", duration=2.0)
    run(res, "canary-1.1")
    html = card(as_role("viewer").get("/workers/").content.decode())
    stable, canary = version_row(html, "opsconsole 1.0.0"), version_row(html, "canary-1.1")
    assert 'version-runs">3<' in stable and "0.0 %" in stable and "highest error rate" not in stable
    assert 'version-runs">2<' in canary and 'version-errors">1<' in canary and "50.0 %" in canary
    assert "highest error rate" in canary and "250 ms / 2.0 s" in canary
    assert 'id="versions-none"' not in html


def test_one_version_or_none_says_there_is_nothing_to_compare(as_role):
    client = as_role("viewer")
    assert "No run was recorded in the last 60 minutes" in card(client.get("/workers/").content.decode())
    run(f.resource("a"), "opsconsole 1.0.0")
    html = card(client.get("/workers/").content.decode())
    assert "Only one operator version ran" in html and "highest error rate</span>" not in html
    assert 'data-version="opsconsole 1.0.0"' in html


def test_a_viewer_limited_to_a_namespace_sees_its_versions_only(as_role):
    run(f.resource("mine"), "v1")
    run(f.resource("theirs", namespace="secret"), "v2", result="error")
    html = card(as_role("viewer", ["default"]).get("/workers/").content.decode())
    assert 'data-version="v1"' in html and 'data-version="v2"' not in html
