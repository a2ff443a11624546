"""The overview's state machine diagram in Debian's Chromium (Playwright) against a live server: the Graphviz-laid
SVG is visible at 1280 px, has every state of the kind as a node, and its states are focusable links."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from reconcilers.kinds.memcached import MACHINE
from reconcilers.services.selectors import liveness
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in
from tests.opsconsole.console.test_browser import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def test_the_overview_diagram_is_visible_with_every_state_as_a_node(chromium, live_server, queue, monkeypatch):
    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@w1"], "error": ""})
    f.resource("diagrammed", phase="Running")
    user = f.user("machine-viewer", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
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
