"""Fixtures of the API tests: an API client per role (session login or token), users limited to
namespaces, a private workqueue, the throttle history emptied between tests. The kubesim fixtures come
from tests/reconcilers/conftest.py (helper D's), imported here (the engine ones in the end-to-end module)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from opsconsole.accounts.login_throttle import KEY_PREFIX as LOGIN_KEY_PREFIX
from opsconsole.api.throttling import THROTTLE_KEY_PREFIX
from reconcilers.engine import dispatch
from tests.opsconsole.api import factories
from tests.reconcilers.conftest import (  # noqa: F401 - fixtures, re-exported for this directory
    Sent,
    kapi,
    namespace,
    package_kubesim,
    reconcilers,
)

kubesim = package_kubesim()  # a kubesim of this directory's own


@pytest.fixture(autouse=True)
def _fresh_throttle(redis_client) -> Iterator[None]:
    """Every test starts with no throttle history (the actions' and the login address throttle's)."""

    def clear() -> None:
        keys = [*redis_client.scan_iter(f"{THROTTLE_KEY_PREFIX}*"), *redis_client.scan_iter(f"{LOGIN_KEY_PREFIX}*")]
        if keys:
            redis_client.delete(*keys)

    clear()
    yield
    clear()


@pytest.fixture
def queue(settings, monkeypatch, redis_client) -> Iterator:
    """A private workqueue; dispatching only records the keys (`queue.sent.keys`)."""
    settings.OPSCONSOLE_WORKQUEUE_NAME = f"test-api-{uuid.uuid4().hex[:8]}"
    sent = Sent()
    monkeypatch.setattr(dispatch, "dispatch", sent)
    q = dispatch.get_queue()
    q.sent = sent
    yield q
    q.clear()


@pytest.fixture
def as_user(db):
    """`as_user(role, namespaces=None, token=False)` → an APIClient logged in (session) or with a token."""
    from opsconsole.accounts.services import token_create

    def make(role: str | None, namespaces: list[str] | None = None, *, token: bool = False,
             username: str | None = None) -> APIClient:
        u = factories.user(username or f"{role or 'none'}-{uuid.uuid4().hex[:6]}", role, namespaces)
        client = APIClient()
        if token:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(u, name='test').secret}")
        else:
            client.force_login(u)
        client.user = u
        return client

    return make


@pytest.fixture
def viewer(as_user) -> APIClient:
    return as_user("viewer")


@pytest.fixture
def operator(as_user) -> APIClient:
    return as_user("operator")


@pytest.fixture
def admin(as_user) -> APIClient:
    return as_user("admin")
