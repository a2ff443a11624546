"""The workers page in Debian's Chromium (Playwright) with two real Celery worker processes on a private
queue: both are listed with their pool and concurrency, read through Celery's remote control."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from reconcilers.services import workers
from tests.fixtures.engines import Engine
from tests.opsconsole.console.test_browser import Console, browser  # noqa: F401 - the module's Chromium

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def two_workers(django_db_setup, django_db_blocker, redis_client) -> Iterator[Engine]:
    """Two prefork Celery workers (one child each) on a queue of their own, started once for the module."""
    engine = Engine(f"test-d-workers-{uuid.uuid4().hex[:8]}", {}, None)
    with django_db_blocker.unblock():
        try:
            for i in range(2):
                engine.start_worker(f"{engine.queue_name[-8:]}-{i}")
            engine.wait_workers(timeout=60)
        except BaseException:
            engine.stop()
            raise
    try:
        yield engine
    finally:
        for w in engine.workers:
            w.stop()


def test_the_workers_page_lists_two_workers_with_pool_and_concurrency(browser, live_server, transactional_db,  # noqa: F811
                                                                       two_workers):
    workers.workers_cache_clear()  # no reading of an earlier test in this process
    c = Console(browser, live_server.url, "viewer", [])
    try:
        c.login()
        c.page.click("nav >> text=Workers")
        c.page.wait_for_url("**/workers/")
        host = socket.gethostname()
        for w in two_workers.workers:
            row = c.page.locator(f"tr.worker[data-worker='{w.name}@{host}']")
            expect(row).to_be_visible()
            expect(row.locator(".worker-pool")).to_have_text("prefork")
            expect(row.locator(".worker-concurrency")).to_have_text("1")
            expect(row.locator(".worker-pid")).to_have_text(str(w.proc.pid))
            assert "answering" in row.inner_text() and host in row.locator(".worker-host").inner_text()
        c.shot("workers")
        c.page.set_viewport_size({"width": 1280, "height": 900})
        assert c.page.evaluate("document.documentElement.scrollWidth") <= 1280  # no page-wide overflow
        assert c.errors == []
    finally:
        c.close()
