"""A failed run's trace page and the collapsed runs table in Debian's Chromium (Playwright) against a live server
(rows created directly, no engine): the trace is marked failed, its link leads back to the resource, whose 20
repeated requeue_after runs are one row that opens from the keyboard; no JavaScript console errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in
from tests.opsconsole.console.test_runs_and_trace_pages import TID, _failed_trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def test_a_failed_trace_is_marked_failed_and_links_back_to_its_collapsed_runs(chromium, live_server, queue):
    res = f.resource("stuck-web", phase="Failed", reason="ProgressDeadlineExceeded", last_result="error",
                     last_reconcile_at=timezone.now() - timedelta(minutes=1))
    t0 = timezone.now() - timedelta(minutes=10)
    for i in range(20):
        f.run(res, result="requeue_after", duration=0.05, at=t0 + timedelta(seconds=5 * i))
    _failed_trace(res)  # the newest run: an error, with its trace's spans
    user = f.user("trace-viewer", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
        page.goto(f"{live_server.url}/traces/{TID}/")
        expect(page.locator("#trace-outcome")).to_contain_text("failed")
        expect(page.locator("section.trace-context.trace-failed")).to_be_visible()
        expect(page.locator("#time-axis text").first).to_have_text("0 ms")
        expect(page.locator("tr.span-error .span-exception", has_text="the object has been modified")).to_be_visible()
        page.locator("tr.span-error summary.span-name").first.click()  # the span's attributes on click
        expect(page.locator("tr.span-error dl.attrs").first).to_contain_text("opsconsole.result")
        page.locator("a.trace-back").click()
        page.wait_for_url(f"**/resources/{res.pk}/")
        group = page.locator("details.run-group")
        expect(group).to_have_count(1)
        expect(group.locator("summary")).to_contain_text("× 20")
        expect(group.locator("tr.run").first).to_be_hidden()
        group.locator("summary").focus()
        page.keyboard.press("Enter")
        expect(group.locator("tr.run")).to_have_count(20)
        expect(group.locator("tr.run").first).to_be_visible()
        expect(page.locator("#last-reconcile")).to_contain_text("the last reconcile failed")
        assert errors == []
    finally:
        context.close()
