"""The console in Debian's Chromium (Playwright) against a live server on kubesim, Redis, two real Celery
workers and the controller: log in; a CR goes Pending → Running without a reload; "Reconcile now" with a
reason is followed until handled and its run appears; a trace link leads to the waterfall; the audit log
filters; a viewer sees no action buttons and a forged POST is refused; a CR's `<script>` renders as text; no
JavaScript console errors on any page. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.models import ActionRecord, ReconcileRun, Resource, Span
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

#: the engine of this module traces, so a run's trace link leads to stored spans
ENGINE_EXTRA_ENV = {"OPSCONSOLE_TRACING": "on"}

pytestmark = [pytest.mark.integration, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[3]
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-gpu"]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """One headless Chromium for the module."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM is used next to Playwright's sync loop
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        expect.set_options(timeout=10000)
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


class Console:
    """A browser page on the live server, logged in as a user of a role, collecting console errors."""

    def __init__(self, browser, base: str, role: str, namespaces: list[str]) -> None:
        self.base = base
        self.user = f.user(f"{role}-b{os.getpid()}-{len(ActionRecord.objects.all()[:1])}{timezone.now():%H%M%S%f}",
                           role, namespaces)
        self.context = browser.new_context(viewport={"width": 1366, "height": 900})
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()))

    def login(self) -> None:
        self.page.goto(self.base + "/login/")
        self.page.fill("#id_username", self.user.username)
        self.page.fill("#id_password", "pw-" + self.user.username)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.base + "/")

    def go(self, path: str) -> None:
        self.page.goto(self.base + path)

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def console(browser, live_server, integration, kapi, namespace):  # noqa: F811
    """`console(role)` → a logged-in Console; reconcile tasks sent from the server go to the engine's queue."""
    from opsconsole.celery import app

    default_queue = app.conf.task_default_queue
    app.conf.task_default_queue = integration.queue_name
    opened: list[Console] = []

    def open_as(role: str) -> Console:
        c = Console(browser, live_server.url, role, [namespace])
        c.login()
        opened.append(c)
        return c

    try:
        yield open_as
    finally:
        app.conf.task_default_queue = default_queue
        for c in opened:
            c.close()


def _mirrored(namespace: str, name: str, phase: str) -> Resource:
    return wait_for(lambda: Resource.objects.filter(namespace=namespace, name=name, phase=phase).first(),
                    timeout=60, interval=0.1)


def test_an_operator_follows_a_cr_from_pending_to_running_and_reconciles_it_now(console, kapi, namespace):
    kube.create_object(kapi, GADGET, gadget(namespace, "web", mode="pending", requeueAfter=3600))
    res = _mirrored(namespace, "web", "Pending")
    c = console("operator")
    assert c.page.locator(".who-role").inner_text() == "operator"
    assert namespace in c.page.locator(".who-ns").inner_text()
    c.page.wait_for_selector(".machine[aria-label='Gadget state machine']")
    c.shot("overview")

    c.go(f"/resources/{res.pk}/")
    assert "Pending" in c.page.locator("#phase").inner_text()
    c.page.evaluate("window.__notReloaded = true")
    kube.patch_object(kapi, GADGET, namespace, "web", {"spec": {"mode": "ok"}})
    expect(c.page.locator("#phase")).to_contain_text("Running", timeout=30000)
    assert c.page.evaluate("window.__notReloaded") is True
    c.page.wait_for_selector("#timeline li:nth-child(2)")  # Pending, then Running, in the timeline
    assert "Running" in c.page.locator("#timeline li").first.inner_text()

    runs_before = ReconcileRun.objects.filter(resource=res).count()
    expect(c.page.locator("tr.run")).to_have_count(runs_before, timeout=10000)
    c.page.fill("#reason", "checking the console")
    c.page.click("#reconcile-now")
    c.page.wait_for_url("**/?request=*")
    expect(c.page.locator(".request-state")).to_contain_text("succeeded", timeout=30000)
    # The request's own run appears without a reload. The controller may also see the annotation change and
    # queue one more run after it (coalescing only merges what is queued at the same time), so count >=.
    run = ReconcileRun.objects.filter(resource=res, request__isnull=False).get()
    manual_row = c.page.locator(f"tr.run[data-run='{run.pk}']")
    expect(manual_row).to_be_visible(timeout=15000)
    assert "manual" in manual_row.inner_text() and "success" in manual_row.inner_text()
    assert c.page.locator("tr.run").count() >= runs_before + 1
    c.shot("resource-detail")
    # The workers trace (ENGINE_EXTRA_ENV): the run carries its trace id, and its spans reach the span table.
    run.refresh_from_db()
    assert run.trace_id
    wait_for(lambda: Span.objects.filter(trace_id=run.trace_id, name="reconcile Gadget").exists(), timeout=15)
    c.page.locator(f"tr.run[data-run='{run.pk}'] a.trace-link").click()
    c.page.wait_for_url(f"**/traces/{run.trace_id}/**")
    c.page.wait_for_selector("#waterfall tr.span")
    assert c.page.locator("#waterfall tr.span").count() >= 2  # the reconcile and its API calls
    assert "reconcile Gadget" in c.page.locator("#waterfall").inner_text()
    c.shot("trace")

    c.go("/resources/?namespace=" + namespace)
    c.page.check("input.select-all")
    assert c.page.locator("input[name=ids]:checked").count() == 1
    c.page.fill("#bulk-reason", "bulk from the browser")
    c.page.click("#bulk-reconcile")
    c.page.wait_for_selector(".msg-success")
    assert "Reconcile requested for 1 of 1" in c.page.locator(".msg-success").inner_text()
    c.shot("resources")

    c.go("/audit/")
    c.page.fill("input[name=name]", "web")
    c.page.fill("#audit-to", "Running")
    c.page.click("#audit-filter")
    c.page.wait_for_url("**to_phase=Running*")
    expect(c.page.locator("tr.audit-row")).to_have_count(1)
    assert "Running" in c.page.locator("tr.audit-row").inner_text()
    c.shot("audit")

    c.go("/queue/")
    c.page.wait_for_selector("#queue-depth")
    c.shot("queue")
    assert c.errors == []


def test_a_viewer_sees_no_actions_a_forged_post_is_refused_and_markup_renders_as_text(console, kapi, namespace):
    evil = "<script>alert(1)</script>"
    kube.create_object(kapi, GADGET, gadget(namespace, "evil", mode=evil))
    res = _mirrored(namespace, "evil", "Running")
    c = console("viewer")
    c.go(f"/resources/{res.pk}/")
    assert evil in c.page.locator("#message").inner_text()  # shown as text
    assert c.page.locator("#message script").count() == 0
    assert c.page.locator("#reconcile-now").count() == 0
    c.go(f"/resources/?namespace={namespace}")
    assert c.page.locator("input[name=ids]").count() == 0 and c.page.locator("#bulk-reconcile").count() == 0
    c.shot("resources-viewer")
    token = next(k["value"] for k in c.context.cookies() if k["name"] == "csrftoken")
    response = c.page.request.post(c.base + f"/resources/{res.pk}/reconcile",
                                   form={"reason": "forged", "csrfmiddlewaretoken": token},
                                   headers={"Referer": c.base + "/"})
    assert response.status == 403
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.actor, record.outcome, record.reason) == (c.user.username, "refused", "forged")
    for path in ("/", "/audit/", "/queue/"):
        c.go(path)
        c.page.wait_for_load_state("networkidle")
    assert c.errors == []
