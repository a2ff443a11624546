"""The overview's state machine diagram in Debian's Chromium (Playwright) against a live server: the Graphviz-laid
SVG is visible at 1280 px, has every state of the kind as a node, and its states are focusable links."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from reconcilers.kinds.memcached import MACHINE
from reconcilers.services.selectors import stats
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.test_browser import ARGS, CHROMIUM, SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    """One headless Chromium for the module."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM is used next to Playwright's sync loop
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        expect.set_options(timeout=10000)
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


def test_the_overview_diagram_is_visible_with_every_state_as_a_node(chromium, live_server, queue, monkeypatch):
    monkeypatch.setattr(stats, "workers_alive", lambda **_: {"workers": ["celery@w1"], "error": ""})
    f.resource("diagrammed", phase="Running")
    user = f.user("machine-viewer", "viewer")
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/login/")
        page.fill("#id_username", user.username)
        page.fill("#id_password", "pw-" + user.username)
        page.click("button[type=submit]")
        page.wait_for_url(live_server.url + "/")
        svg = page.locator('svg.machine[aria-label="Memcached state machine"]')
        expect(svg).to_be_visible()
        nodes = svg.locator("g.state")
        assert nodes.count() >= len(MACHINE.states)
        assert set(nodes.evaluate_all("els => els.map(e => e.dataset.state)")) >= set(MACHINE.states)
        expect(svg.locator('g.state[data-state="Running"]')).to_have_class("state st-ok cls-ready")
        box = svg.bounding_box()
        assert box is not None and box["width"] > 600  # laid out left to right, wider than the old half width
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "overview-machine-1280.png"), full_page=True)
    finally:
        context.close()
