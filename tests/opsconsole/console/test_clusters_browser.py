"""The console across clusters in Debian's Chromium (Playwright) against a live server (issue 41): the overview
and the resources list with two clusters, the navigation's picker narrowing both to one (the choice kept by the
navigation's links), and a detail page naming its cluster; no JavaScript console errors."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in
from tests.opsconsole.console.test_browser import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_two_clusters_the_picker_and_a_detail_page_naming_its_cluster(chromium, live_server, queue):
    now = timezone.now()
    f.cluster("default", heartbeat_at=now, leader="ctl-default-0")
    f.cluster("prod", labels={"env": "prod"}, heartbeat_at=now, leader="ctl-prod-0", api_requests=50)
    f.resource("web", "team-a", cluster="prod", phase="Running")
    f.resource("db", "team-a", cluster="prod", phase="Pending")
    f.resource("web", "team-a", phase="Running")
    user = f.user("clusters-viewer", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
        table = page.locator("#cluster-table")
        expect(table.locator("tbody tr")).to_have_count(2)
        expect(page.locator("#cluster-prod .cluster-total")).to_have_text("2")
        expect(page.locator("#cluster-default .cluster-total")).to_have_text("1")
        expect(page.locator("#cluster-total .cluster-total")).to_have_text("3")
        expect(page.locator("#cluster-prod .cluster-state")).to_contain_text("connected")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "clusters-overview.png"), full_page=True)

        page.select_option("#cluster-select", "prod")  # the picker submits itself
        page.wait_for_url("**/?cluster=prod")
        expect(page.locator("#cluster-table tbody tr")).to_have_count(1)
        expect(page.locator("#cluster-prod")).to_be_visible()
        expect(page.locator("#cluster-select")).to_have_value("prod")

        page.get_by_role("link", name="Resources", exact=True).click()  # the navigation keeps the choice
        page.wait_for_url("**/resources/?cluster=prod")
        rows = page.locator("#resources-table tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.locator(".cluster-cell")).to_have_text(["prod", "prod"])
        page.screenshot(path=str(SHOTS / "clusters-resources.png"), full_page=True)

        page.select_option("#cluster-select", "")  # All clusters again
        page.wait_for_url("**/resources/?cluster=")
        expect(page.locator("#resources-table tbody tr")).to_have_count(3)

        page.locator("#resources-table tbody tr", has_text="prod").filter(has_text="db").locator(".res-name").click()
        expect(page.locator("#res-cluster")).to_have_text("cluster prod")
        expect(page.locator("h1.res-title")).to_contain_text("in cluster prod")
        assert errors == []
    finally:
        context.close()
