"""Issue 42 in the console: the detail page's first panel says why the object is in its phase (the transition,
the run with a link to its page, the triggers with their actors, the children's Warnings, a loop); the run page
shows why the run ran; the objectives page shows each kind's attainment and burn rate per window; a viewer of
other namespaces gets 404 for the run."""

from __future__ import annotations

import re

import pytest

from tests.opsconsole.api.test_explain_api import scene

pytestmark = pytest.mark.django_db


def test_the_why_panel_comes_first_and_links_the_run_and_its_triggers(as_role):
    res, run, transition = scene()
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert html.index('id="why-h"') < html.index('id="sm-h"')  # before the state machine: the first panel
    panel = html[html.index('id="why"'):html.index("</section>", html.index('id="why"'))]
    assert f"Made by run {run.id}" in panel and f'href="/runs/{run.id}/"' in panel
    assert re.search(r'data-trigger="child"[^<]*<span[^>]*>child', panel)
    assert "child Deployment shop/web changed (status)" in panel
    assert "kube:dana" in panel and "and 2 more coalesced" in panel
    assert "FailedScheduling" in panel and "1 Warning Event from its children" in panel
    assert f"#{transition.seq}" in panel and "a reconcile loop" in panel


def test_the_run_page_says_why_it_ran_and_is_404_outside_the_namespaces(as_role):
    res, run, _ = scene()
    html = as_role("viewer").get(f"/runs/{run.id}/").content.decode()
    assert 'id="run-triggers"' in html and html.count("<tr data-trigger=") == 2
    assert "authenticated by the Kubernetes API server" in html and f'href="/resources/{res.pk}/"' in html
    assert as_role("viewer", ["elsewhere"]).get(f"/runs/{run.id}/").status_code == 404
    assert as_role("viewer").get("/runs/999999999/").status_code == 404


def test_the_objectives_page_shows_attainment_and_burn_rate_per_window(as_role):
    scene()
    html = as_role("viewer").get("/slo/").content.decode()
    row = html[html.index('data-kind="Memcached"'):]
    row = row[:row.index("</tr>")]
    assert "99 % of Pending phases are left within 5 min" in row
    assert row.count("data-window=") == 3
