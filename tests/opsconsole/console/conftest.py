"""Fixtures of the console tests: the memoised engine reads forgotten between tests, one headless Chromium per
browser module; helpers to post a form and to sign in a browser. The clients per role, the private workqueue and
the kubesim fixtures come from the root fixture plugin (tests/fixtures)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from tests.fixtures.web import engine_memos_clear


@pytest.fixture(autouse=True)
def _fresh_memos(settings, tmp_path) -> Iterator[None]:
    """No memoised Lease, ping or printer columns leak between tests; no kubeconfig unless a test sets one."""
    settings.KUBECONFIG = str(tmp_path / "absent-kubeconfig")
    engine_memos_clear()
    yield
    engine_memos_clear()


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
