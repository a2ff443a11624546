"""Logins throttled and recorded (issue 20, django-axes): wrong passwords lock the account out (per username,
from any address) after AXES_FAILURE_LIMIT failures for the cool-off time; during the lockout even the right
password is refused with the reason on the login page; failures of other names from the same address lock no
other account out; every failure and every lockout is in axes' tables and in the action record; API tokens are
not affected. The per-address throttle and the trusted proxy: tests/security/test_login_proxy.py."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.test import Client

from opsconsole.accounts.tokens import token_create
from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def _login(username: str, password: str, address: str) -> object:
    return Client().post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_wrong_passwords_lock_the_account_out_and_say_why(settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    alice = f.user("alice-throttle", "admin")
    for i in range(4):
        response = _login("alice-throttle", f"wrong-{i}", "10.0.0.1")
        assert response.status_code == 200 and "password didn" in response.content.decode()
    locked = _login("alice-throttle", "wrong-4", "10.0.0.1")  # the fifth failure starts the lockout
    assert locked.status_code == 429
    assert "Too many failed attempts; try again in 15 minutes." in locked.content.decode()
    assert int(locked["Retry-After"]) == 15 * 60
    # the right password is refused while locked out, from this address and from another one (per account)
    for address in ("10.0.0.1", "10.0.0.2"):
        refused = _login("alice-throttle", "pw-alice-throttle", address)
        assert refused.status_code == 429, address
        assert "try again in" in refused.content.decode() and "_auth_user_id" not in refused.client.session
    # another account from another address is unaffected
    f.user("bob-throttle", "viewer")
    ok = _login("bob-throttle", "pw-bob-throttle", "10.0.0.3")
    assert ok.status_code == 302 and ok["Location"] == "/"
    # the API's token auth does not go through the login: unaffected
    secret = token_create(alice, name="t").secret
    assert Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {secret}",
                        REMOTE_ADDR="10.0.0.1").status_code == 200

    # recorded: axes' own table, and the action record
    assert AccessAttempt.objects.filter(username="alice-throttle").count() >= 1
    records = list(ActionRecord.objects.filter(target="alice-throttle").order_by("id"))
    failed = [r for r in records if r.action == "auth.login_failed"]
    lockouts = [r for r in records if r.action == "auth.locked_out"]
    assert len(failed) == 5 and all(r.status_code == 401 and r.outcome == "refused" for r in failed)
    assert [r.remote_addr for r in failed] == ["10.0.0.1"] * 5
    assert len(lockouts) == 3 and all(r.status_code == 429 and r.outcome == "refused" for r in lockouts)
    assert {r.remote_addr for r in lockouts} == {"10.0.0.1", "10.0.0.2"}
    assert lockouts[0].detail["minutes_left"] == 15


def test_failures_of_made_up_names_from_one_address_lock_no_real_user_out():
    for i in range(5):
        _login(f"nobody-{i}", "wrong", "10.0.1.1")  # five made-up accounts, one address (a proxy's, say)
    for i in range(5):
        _login("nobody-0", f"wrong-{i}", "10.0.1.1")  # and one made-up account locked out
    f.user("carol-throttle", "viewer")
    assert _login("carol-throttle", "pw-carol-throttle", "10.0.1.1").status_code == 302  # per account only
    assert _login("nobody-0", "anything", "10.0.1.2").status_code == 429  # the made-up account is locked


def test_a_success_before_the_limit_resets_the_count():
    f.user("dave-throttle", "viewer")
    for _ in range(4):
        _login("dave-throttle", "wrong", "10.0.2.1")
    assert _login("dave-throttle", "pw-dave-throttle", "10.0.2.1").status_code == 302
    for _ in range(4):
        assert _login("dave-throttle", "wrong", "10.0.2.1").status_code == 200
    assert _login("dave-throttle", "pw-dave-throttle", "10.0.2.1").status_code == 302
