"""The rollout view of a KVStore mid-upgrade in Debian's Chromium (Playwright) against a live server: where the
upgrade is, the budget, why it is blocked, per ordinal the revision, readiness and zone, and the view following the
upgrade live as the mirrored status moves on (blocked → the next ordinal moving). The selector's own cases too."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from opsconsole.console.rollout import resource_rollout
from reconcilers.models import Resource
from reconcilers.services.selectors import liveness
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import signed_in
from tests.opsconsole.console.test_browser import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KVSTORE = {"group": "stateful.example.com", "version": "v1alpha1", "plural": "kvstores", "kind": "KVStore"}
NEW, OLD = "kv-7c9d", "kv-5b21"
BUDGET = ("PodDisruptionBudget kv allows 0 disruptions (1 Ready, 2 must stay Ready); not Ready: kv-0")


def ordinal(i, revision, ready=True):
    return {"ordinal": i, "pod": f"kv-{i}", "revision": revision, "updated": revision == NEW, "ready": ready,
            "zone": f"zone-{'abc'[i]}", "node": f"kubesim-node-{i + 1}"}


def status(phase, partition, ordinals, allowed):
    return {"phase": phase, "partition": partition, "updateRevision": NEW, "currentRevision": OLD,
            "disruptionsAllowed": allowed, "ordinals": ordinals}


BLOCKED_AT_2 = status("Blocked", 2, [ordinal(0, OLD, ready=False), ordinal(1, OLD), ordinal(2, NEW)], 0)
MOVING_1 = status("Replacing", 1, [ordinal(0, OLD), ordinal(1, NEW, ready=False), ordinal(2, NEW)], 0)


def test_the_selector_reads_the_ordinals_and_skips_kinds_without_them():
    blocked = f.resource("kv", kind=KVSTORE, phase="Blocked", reason="BudgetExhausted", message=BUDGET,
                         spec={"replicas": 3, "minAvailable": 2}, status=BLOCKED_AT_2)
    view = resource_rollout(blocked)
    assert view.where == "ordinal 2 upgraded; ordinal 1 moves next"
    assert (view.blocked_reason, view.disruptions_allowed, view.min_available) == ("BudgetExhausted", 0, 2)
    assert [o.at_partition for o in view.ordinals] == [False, False, True]
    assert resource_rollout(f.resource("plain")) is None


def test_the_rollout_view_mid_upgrade_shows_the_block_then_follows_the_next_step(chromium, live_server, queue,
                                                                                 monkeypatch):
    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@w1"], "error": ""})
    res = f.resource("kv", kind=KVSTORE, phase="Blocked", reason="BudgetExhausted", message=BUDGET,
                     spec={"replicas": 3, "minAvailable": 2}, status=BLOCKED_AT_2)
    user = f.user("rollout-viewer", "viewer")
    context, page, errors = signed_in(chromium, live_server.url, user)
    try:
        page.goto(f"{live_server.url}/resources/{res.pk}/")
        view = page.locator("#rollout")
        expect(view).to_be_visible()
        expect(page.locator("#rollout-blocked")).to_contain_text("Blocked: BudgetExhausted")
        expect(page.locator("#rollout-blocked")).to_contain_text("not Ready: kv-0")
        expect(page.locator("#rollout-budget")).to_have_text("0 disruptions allowed (minAvailable 2)")
        expect(page.locator("#rollout-where")).to_have_text("ordinal 2 upgraded; ordinal 1 moves next")
        rows = page.locator("#rollout-ordinals tbody tr")
        expect(rows).to_have_count(3)
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.ordinal)") == ["2", "1", "0"]  # highest first
        two = page.locator('#rollout-ordinals tr[data-ordinal="2"]')
        expect(two.locator(".ord-revision")).to_contain_text(f"new {NEW}")
        expect(two.locator(".ord-zone")).to_have_text("zone-c")
        expect(two).to_have_attribute("aria-current", "step")
        zero = page.locator('#rollout-ordinals tr[data-ordinal="0"]')
        expect(zero.locator(".ord-ready")).to_have_text("not Ready")
        expect(zero.locator(".ord-revision")).to_contain_text(f"old {OLD}")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "rollout-blocked.png"), full_page=True)
        # kv-0 Ready again: the upgrade resumed and moved ordinal 1 (the mirror follows the status)
        Resource.objects.filter(pk=res.pk).update(phase="Replacing", reason="OrdinalMoved",
                                                  message="ordinal 1: partition 2 -> 1", status=MOVING_1)
        expect(page.locator("#rollout-blocked")).to_have_count(0)
        expect(page.locator("#rollout-where")).to_contain_text("ordinal 1 (kv-1) is being replaced")
        expect(page.locator("#rollout-partition")).to_contain_text("1 of 3")
        one = page.locator('#rollout-ordinals tr[data-ordinal="1"]')
        expect(one).to_have_attribute("aria-current", "step")
        expect(one.locator(".ord-revision")).to_contain_text("new")
        assert not errors, errors
    finally:
        context.close()
