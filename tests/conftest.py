"""Fixtures shared by the whole suite: a real Redis, real Celery workers on a private queue."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis as redis_lib
from django.conf import settings

from tests.support.workers import WorkerProcess

# every reconcile traced in the engines the tests start (as `make test` sets it; plain `pytest` too)
os.environ.setdefault("OPSCONSOLE_TRACE_SAMPLE_RATIO", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long variants (marked `slow`) run only when a marker expression is given (`-m slow`)."""
    if config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(scope="session")
def redis_client() -> Iterator[redis_lib.Redis]:
    """The suite's Redis (REDIS_URL), which must answer: tests talk to a real server."""
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    client.ping()
    yield client
    client.close()


@pytest.fixture(scope="session")
def celery_queue() -> str:
    """A queue name private to this test session."""
    from opsconsole.celery import app

    queue = f"test-{uuid.uuid4().hex[:10]}"
    app.conf.task_default_queue = queue
    return queue


@pytest.fixture
def celery_worker(transactional_db: None, celery_queue: str, redis_client: redis_lib.Redis) -> Iterator[WorkerProcess]:
    """A real prefork Celery worker on this session's queue, sharing the test database."""
    from opsconsole.celery import app

    worker = WorkerProcess(celery_queue, concurrency=1).start()
    try:
        worker.wait_ready(app)
        yield worker
    finally:
        worker.stop()
