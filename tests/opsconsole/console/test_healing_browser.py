"""The Healing panel in Debian's Chromium (Playwright) against a live server on kubesim (no engine: the resource
is mirrored by hand): an operator suspends a resource through the form and sees the banner with the reason,
resumes it, and sees both in the healing records; no JavaScript console errors."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reconcilers.engine.healing.suspend import SUSPENDED
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.test_healing_api import Cluster
from tests.opsconsole.console.conftest import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def test_an_operator_suspends_and_resumes_from_the_detail_page(chromium, live_server, kapi, queue, reconcilers):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    cluster = Cluster(kapi)
    res = cluster.gadget(cluster.inside, "web", generations=2)
    user = f.user("heal-op", "operator", [cluster.inside])
    context, page, errors = signed_in(chromium, live_server.url, user, width=1366, height=900)
    try:
        page.goto(f"{live_server.url}/resources/{res.pk}/")
        expect(page.locator("#suspended-banner")).to_have_count(0)
        page.fill("#suspend-reason", "database migration")
        page.select_option("#suspend-duration", "900")
        page.click("#suspend-submit")
        banner = page.locator("#suspended-banner")
        expect(banner).to_contain_text("database migration")
        expect(banner).to_contain_text(f"user:{user.username}")
        assert cluster.live(res)["metadata"]["annotations"][SUSPENDED] == "database migration"
        page.fill("#resume-reason", "migration done")
        page.click("#resume-submit")
        expect(page.locator("#suspended-banner")).to_have_count(0)
        rows = page.locator("#healing-records tr.healing-record")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("resumed")
        expect(rows.nth(0)).to_contain_text("migration done")
        expect(rows.nth(1)).to_contain_text("suspended")
        expect(rows.nth(1)).to_contain_text("database migration")
        assert SUSPENDED not in (cluster.live(res)["metadata"].get("annotations") or {})
        assert errors == []
    finally:
        context.close()
