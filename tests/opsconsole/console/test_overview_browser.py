"""The overview v2 in Debian's Chromium (Playwright) against a live server: a fresh-start overview with runs
spread over the last hour shows the engine strip and full-width charts with clock-time axis labels at 1280 px
and 1920 px (no horizontal scroll); choosing 15 min (by keyboard, its focus visible) changes the axis labels;
no JavaScript console errors."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from reconcilers.services.selectors import liveness
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in
from tests.opsconsole.console.test_browser import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def _minutes_apart(labels: list[str]) -> set[int]:
    times = [datetime.strptime(label[-5:], "%H:%M") for label in labels]
    return {int((b - a).total_seconds() // 60) % (24 * 60) for a, b in zip(times, times[1:], strict=False)}


def test_a_fresh_start_overview_shows_the_strip_and_charts_over_a_window(chromium, live_server, queue,
                                                                        monkeypatch):
    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@w1"], "error": ""})
    res = f.resource("fresh")
    now = timezone.now()
    for minutes in (1, 1, 5, 12, 25, 40, 55):  # a fresh start: runs over the last hour, not one spike
        f.run(res, at=now - timedelta(minutes=minutes, seconds=5), duration=0.05 * minutes)
    user = f.user("overview-viewer", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
        strip = page.locator("#engine-strip")
        expect(strip).to_be_visible()
        expect(strip.locator(".workers-count")).to_have_text("1")
        expect(strip.locator("#healing-counts a")).to_have_count(4)
        charts = page.locator("svg.chart-wide")
        expect(charts).to_have_count(3)
        hour = charts.nth(0).locator("text.x-tick").all_text_contents()
        assert len(hour) >= 3 and _minutes_apart(hour) == {15}
        expect(charts.nth(0).locator("text.axis-unit")).to_have_text("reconciles/s")
        expect(charts.nth(2).locator("text.axis-unit")).to_have_text("ms")
        rate_points = charts.nth(0).locator("circle.point").count()
        assert rate_points == 60
        assert "peak" in charts.nth(0).locator("desc").text_content()
        for width in (1280, 1920):
            page.set_viewport_size({"width": width, "height": 900})
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            chart_w = charts.nth(0).bounding_box()["width"]
            card_w = page.locator("section.charts-card").bounding_box()["width"]
            assert chart_w > card_w - 60, (width, chart_w, card_w)  # the chart uses the card's width
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"overview-{width}.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 900})
        link = page.locator('#window-picker a[data-window="15m"]')
        link.focus()
        assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
        page.keyboard.press("Enter")
        page.wait_for_url(live_server.url + "/?window=15m")
        expect(page.locator('#window-picker a[aria-current="true"]')).to_have_text("15 min")
        quarter = page.locator("svg.chart-wide").nth(0).locator("text.x-tick").all_text_contents()
        assert quarter != hour and _minutes_apart(quarter) == {5}
        assert page.locator("svg.chart-wide").nth(0).locator("circle.point").count() == 30
        assert errors == []
    finally:
        context.close()
