"""Logins behind a proxy, as an attacker sharing the proxy's address would try them: five failures of a
made-up username through the one proxy address lock no real user out (the lockout is per account); one address
that fails many logins is slowed (429 with Retry-After until its window ends, recorded as `auth.throttled`)
without locking any account and without touching other addresses; the client's address is taken from
X-Forwarded-For only when the peer is a trusted proxy (OPSCONSOLE_TRUSTED_PROXIES), read right to left past
the trusted hops, so a forged left part of the header names no one."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory

from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
PROXY = "10.1.2.3"  # the Ingress controller's Pod


def _login(username: str, password: str, *, forwarded: str = "", remote: str = PROXY) -> object:
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    return Client().post("/login/", {"username": username, "password": password}, REMOTE_ADDR=remote, **extra)


@pytest.fixture
def behind_ingress(settings) -> None:
    settings.OPSCONSOLE_TRUSTED_PROXIES = ["10.0.0.0/8"]


def test_a_made_up_names_failures_through_the_shared_proxy_address_lock_no_real_user_out(behind_ingress):
    for i in range(6):
        _login("no-such-user", f"guess-{i}", forwarded="198.51.100.7")
    f.user("erin-proxy", "viewer")
    ok = _login("erin-proxy", "pw-erin-proxy", forwarded="203.0.113.20")
    assert ok.status_code == 302 and ok["Location"] == "/"
    failed = ActionRecord.objects.filter(action="auth.login_failed", target="no-such-user")
    assert {r.remote_addr for r in failed} == {"198.51.100.7"}  # the real client, not the proxy


def test_even_without_a_trusted_proxy_one_address_locks_out_only_the_account_tried():
    for i in range(6):
        _login("no-such-user-2", f"guess-{i}")  # everyone arrives from the proxy's address
    f.user("frank-proxy", "viewer")
    assert _login("frank-proxy", "pw-frank-proxy").status_code == 302


def test_many_failures_from_one_address_slow_it_without_locking_any_account(settings, monkeypatch):
    from opsconsole.accounts import login_throttle

    settings.OPSCONSOLE_LOGIN_ADDRESS_LIMIT = 8
    settings.OPSCONSOLE_LOGIN_ADDRESS_WINDOW = 60
    now = [6_000_020.0]  # 20 s into a window
    monkeypatch.setattr(login_throttle, "_now", lambda: now[0])
    f.user("gina-proxy", "viewer")
    for i in range(8):
        assert _login(f"spray-{i}", "wrong", remote="192.0.2.50").status_code == 200  # 8 accounts, 1 try each
    slowed = _login("gina-proxy", "pw-gina-proxy", remote="192.0.2.50")
    assert slowed.status_code == 429 and int(slowed["Retry-After"]) == 40
    assert "from your address" in slowed.content.decode()
    record = ActionRecord.objects.filter(action="auth.throttled").order_by("-id").first()
    assert (record.status_code, record.remote_addr, record.target) == (429, "192.0.2.50", "gina-proxy")
    assert _login("gina-proxy", "pw-gina-proxy", remote="192.0.2.51").status_code == 302  # other addresses: no
    now[0] += 40  # the next window: the address may try again, and no account was locked
    assert _login("gina-proxy", "pw-gina-proxy", remote="192.0.2.50").status_code == 302


@pytest.mark.parametrize(("trusted", "remote", "forwarded", "client"), [
    ([], "10.1.2.3", "198.51.100.7", "10.1.2.3"),  # no trusted proxy: the header is ignored
    (["10.0.0.0/8"], "192.0.2.9", "198.51.100.7", "192.0.2.9"),  # an untrusted peer names no client
    (["10.0.0.0/8"], "10.1.2.3", "198.51.100.7", "198.51.100.7"),
    (["10.0.0.0/8"], "10.1.2.3", "6.6.6.6, 198.51.100.7", "198.51.100.7"),  # a forged left part is not reached
    (["10.0.0.0/8"], "10.1.2.3", "198.51.100.7, 10.9.9.9", "198.51.100.7"),  # two trusted hops
    (["10.0.0.0/8"], "10.1.2.3", "10.4.4.4", "10.4.4.4"),  # only trusted hops: the leftmost
    (["10.0.0.0/8"], "10.1.2.3", "not-an-ip, 198.51.100.7", "198.51.100.7"),
    (["10.0.0.0/8"], "10.1.2.3", "198.51.100.7, garbage", "10.1.2.3"),  # garbage: no further left
    (["10.0.0.0/8", "fd00::/8"], "fd00::1", "[2001:db8::5]:4711", "2001:db8::5"),
    (["10.0.0.0/8"], "10.1.2.3", "198.51.100.7:5555", "198.51.100.7"),
])
def test_the_client_address_believes_only_trusted_hops(settings, trusted, remote, forwarded, client):
    from opsconsole.accounts.client_address import client_address

    settings.OPSCONSOLE_TRUSTED_PROXIES = trusted
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == client
