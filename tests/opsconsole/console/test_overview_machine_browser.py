"""Issue 43 in Debian's Chromium (Playwright) against a live server. The overview with four kinds (the three
built-in ones and the user's own, registered last): the user's kind, the one with activity, comes first and the
quiet ones are folded (a closed `<details>`), counts pluralised. A resource whose path took ten edges of the
Memcached machine, some several times: every `<text>` of the diagram (states, their figures, the edge numbers) is
clear of every other and inside the drawing, as the browser lays them out (getBBox)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from reconcilers.engine import registry
from reconcilers.services.selectors import liveness
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in
from tests.opsconsole.console.test_browser import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
GADGET = {"group": "test.opsconsole.io", "version": "v1", "plural": "gadgets", "kind": "Gadget"}
#: a path through the Memcached machine taking ten edges, three of them more than once ("#2,#6,#13 …" labels)
PATH = ["Pending", "Running", "Degraded", "Failed", "Pending", "Running", "Failed", "Running", "RollingBack",
        "Degraded", "Pending", "Running", "Degraded", "Running", "Terminating"]

#: every <text> of the diagram: its box in the SVG's user units, and the viewBox
BOXES = """svg => {
  const vb = svg.viewBox.baseVal;
  return {view: [vb.x, vb.y, vb.width, vb.height], boxes: Array.from(svg.querySelectorAll('text')).map(t => {
    const b = t.getBBox();
    return {text: t.textContent, cls: t.getAttribute('class'), x: b.x, y: b.y, w: b.width, h: b.height};
  })};
}"""


@pytest.fixture
def four_kinds(settings):
    settings.OPSCONSOLE_RECONCILERS = ["tests.reconcilers.testkinds.GadgetReconciler"]
    settings.OPSCONSOLE_BUILTIN_KINDS = True
    registry.reset()
    yield [r.resource.kind for r in registry.registered()]
    registry.reset()


def test_the_overview_shows_the_kind_with_activity_first_and_folds_the_quiet_ones(chromium, live_server, queue,
                                                                                  monkeypatch, four_kinds):
    assert len(four_kinds) == 4 and four_kinds[-1] == "Gadget"  # the user's kind is registered last
    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@w1"], "error": ""})
    gadget = f.resource("mine", "team", kind=GADGET, phase="")
    for phase in ("Pending", "Running", "Failed", "Running"):
        f.transition(gadget, phase)
    f.resource("quiet-cache", phase="Running")  # a Memcached, no transition in the day: folded
    user = f.user("overview-reader", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
        cards = page.locator("#machines-h ~ div article.machine-card")
        expect(cards.first).to_have_attribute("data-kind", "Gadget")
        expect(cards.first.locator("svg.machine")).to_be_visible()
        expect(cards.first.locator("h3")).to_contain_text("1 resource")
        expect(cards.first.locator("h3")).not_to_contain_text("1 resources")
        folded = page.locator("details#machines-folded")
        expect(folded).to_be_visible()
        assert folded.evaluate("d => d.open") is False
        expect(folded.locator("summary")).to_contain_text("3 more kinds without transitions in the last day")
        expect(folded.locator("summary")).to_contain_text("Memcached (1 resource)")
        for kind in four_kinds[:3]:
            expect(folded.locator(f'article[data-kind="{kind}"] svg.machine')).to_be_hidden()
        shown = page.evaluate("() => Array.from(document.querySelectorAll('article.machine-card'))"
                              ".filter(a => a.checkVisibility()).map(a => a.dataset.kind)")
        assert shown == ["Gadget"]
        folded.locator("summary").click()
        expect(folded.locator('article[data-kind="Memcached"] svg.machine')).to_be_visible()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "overview-four-kinds.png"), full_page=True)
        assert not errors, errors
    finally:
        context.close()


def test_a_path_of_ten_numbered_edges_has_no_label_over_another_or_cut(chromium, live_server, queue, monkeypatch):
    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@w1"], "error": ""})
    res = f.resource("wandering", phase="")
    start = timezone.now() - timedelta(hours=2)
    for i, phase in enumerate(PATH):
        f.transition(res, phase, at=start + timedelta(minutes=7 * i))
    user = f.user("machine-reader", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1280, height=900)
    try:
        page.goto(f"{live_server.url}/resources/{res.pk}/")
        svg = page.locator('svg.machine[aria-label="Memcached state machine"]')
        expect(svg).to_be_visible()
        numbers = svg.locator("g.edge-mark")
        assert numbers.count() >= 10
        legend = page.locator("table.edge-legend tr.edge-label")
        assert legend.count() == numbers.count()
        assert any("," in text for text in legend.all_inner_texts())  # an edge taken several times: "#2,#6 …"
        found = svg.evaluate(BOXES)
        vx, vy, vw, vh = found["view"]
        boxes = [b for b in found["boxes"] if b["w"] > 0 and b["h"] > 0]
        assert len(boxes) >= 10 + 7  # the edge numbers and at least each state's name
        for b in boxes:
            assert vx <= b["x"] and b["x"] + b["w"] <= vx + vw and vy <= b["y"] and b["y"] + b["h"] <= vy + vh, b
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                apart = (a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"]
                         or a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"])
                assert apart, (a, b)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "machine-ten-edges.png"), full_page=True)
        assert not errors, errors
    finally:
        context.close()
