"""Fixtures of the console tests: a logged-in Django test client per role, a private workqueue whose dispatch
only records keys, the memoised engine reads forgotten between tests, and (re-exported) the kubesim fixtures of
tests/reconcilers/conftest.py for the tests that act on a real API server."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from reconcilers.services.selectors import kinds, stats
from tests.opsconsole.api import factories
from tests.opsconsole.api.conftest import queue  # noqa: F401 - the API tests' private workqueue, same rules
from tests.reconcilers.conftest import (  # noqa: F401 - fixtures, re-exported for this directory
    Sent,
    kapi,
    namespace,
    package_kubesim,
    reconcilers,
)

kubesim = package_kubesim()  # a kubesim of this directory's own


@pytest.fixture(autouse=True)
def _fresh_memos(settings, tmp_path) -> Iterator[None]:
    """No memoised Lease, ping or printer columns leak between tests; no kubeconfig unless a test sets one."""
    settings.KUBECONFIG = str(tmp_path / "absent-kubeconfig")
    stats.stats_cache_clear()
    kinds._columns.clear()
    yield
    stats.stats_cache_clear()
    kinds._columns.clear()


@pytest.fixture
def as_role(db, queue, monkeypatch):  # noqa: F811 - queue is the fixture imported above
    """`as_role(role, namespaces=None)` → a Django test Client logged in as a new user with that role
    (`client.user`); CSRF is enforced, as a browser's would be."""
    monkeypatch.setattr(stats, "workers_alive", lambda **_: {"workers": ["celery@test"], "error": ""})

    def make(role: str | None, namespaces: list[str] | None = None) -> Client:
        u = factories.user(f"{role or 'none'}-{uuid.uuid4().hex[:6]}", role, namespaces)
        client = Client(enforce_csrf_checks=True)
        client.force_login(u)
        client.user = u
        return client

    return make


def csrf_post(client: Client, path: str, data: dict, **extra):
    """POST with the CSRF token a page form would carry (the cookie from a GET, the token in the body)."""
    client.get("/")
    token = client.cookies["csrftoken"].value
    return client.post(path, {**data, "csrfmiddlewaretoken": token}, **extra)


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    """One headless Debian Chromium (Playwright) for a browser test module."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM is used next to Playwright's sync loop
    from playwright.sync_api import expect, sync_playwright

    from tests.opsconsole.console.test_browser import ARGS, CHROMIUM

    with sync_playwright() as p:
        expect.set_options(timeout=10000)
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


def signed_in(chromium: Any, base_url: str, user: Any, *, width: int = 1280, height: int = 900
              ) -> tuple[Any, Any, list[str]]:
    """A new browser context and page signed in as `user` (the factories' password), on the overview, and the
    list the page's JavaScript console errors are collected in. The caller closes the context."""
    context = chromium.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(base_url + "/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "pw-" + user.username)
    page.click("button[type=submit]")
    page.wait_for_url(base_url + "/")
    return context, page, errors
