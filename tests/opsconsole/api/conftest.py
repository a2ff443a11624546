"""Fixtures of the API tests: the throttle history emptied between tests. The clients per role, the private
workqueue and the kubesim fixtures come from the root fixture plugin (tests/fixtures)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.web import throttle_history_clear


@pytest.fixture(autouse=True)
def _fresh_throttle(redis_client) -> Iterator[None]:
    """Every test starts with no throttle history (the actions' and the login address throttle's)."""
    throttle_history_clear(redis_client)
    yield
    throttle_history_clear(redis_client)
