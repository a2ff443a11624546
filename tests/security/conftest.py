"""Fixtures of the security and bad-input suite: as in the API and console tests, the throttle history and the
memoised engine reads forgotten between tests (the clients per role, the private workqueue and the kubesim
fixtures come from the root fixture plugin, tests/fixtures); a cheap password hasher (these tests make many
users)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.web import engine_memos_clear, throttle_history_clear


@pytest.fixture(autouse=True)
def _fresh_throttle(redis_client) -> Iterator[None]:
    """Every test starts with no throttle history (the actions' and the login address throttle's)."""
    throttle_history_clear(redis_client)
    yield
    throttle_history_clear(redis_client)


@pytest.fixture(autouse=True)
def _fresh_memos(settings, tmp_path) -> Iterator[None]:
    """No memoised Lease, ping or printer columns leak between tests; no kubeconfig unless a test sets one."""
    settings.KUBECONFIG = str(tmp_path / "absent-kubeconfig")
    engine_memos_clear()
    yield
    engine_memos_clear()


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:
    """These tests make many users: a cheap password hash (the hashing is not what they test)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
