"""Fixtures of the security and bad-input suite: the API tests' clients per role (session or token) and the
console tests' logged-in Django clients (CSRF enforced), a private workqueue whose dispatch only records keys,
and the kubesim fixtures of tests/reconcilers/conftest.py, all re-exported from where they are defined; a cheap
password hasher (these tests make many users)."""

from __future__ import annotations

import pytest

from tests.opsconsole.api.conftest import (  # noqa: F401 - fixtures, re-exported for this directory
    _fresh_throttle,
    admin,
    as_user,
    operator,
    queue,
    viewer,
)
from tests.opsconsole.console.conftest import _fresh_memos, as_role  # noqa: F401 - fixtures, as above
from tests.reconcilers.conftest import kapi, namespace, package_kubesim, reconcilers  # noqa: F401 - fixtures, as above

kubesim = package_kubesim()  # a kubesim of this directory's own


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:
    """These tests make many users: a cheap password hash (the hashing is not what they test)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
