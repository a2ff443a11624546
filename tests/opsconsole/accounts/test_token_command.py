"""`manage.py token create|list|revoke`: the token printed once and stored hashed, its role limit and expiry
applied by the API (an expired or revoked token is a 401 saying so), every create and revoke on the action
record, refusals too."""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from opsconsole.accounts.models import ApiToken
from opsconsole.accounts.tokens import TokenError, token_create, token_expiry_parse
from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_create_prints_the_token_once_limited_to_the_role_and_expiring():
    f.user("ci", "operator")
    out, err = run("create", "--user", "ci", "--role", "viewer", "--expires", "30d", "--name", "deploy")
    secret = out.strip()
    assert secret.startswith("oc_") and secret not in err and "shown this once" in err
    token = ApiToken.objects.get()
    assert token.hash == hashlib.sha256(secret.encode()).hexdigest()
    assert (token.name, token.role) == ("deploy", "viewer")
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    record = last_record()
    assert (record.action, record.outcome, record.auth, record.target) == ("token.create", "allowed", "command",
                                                                          "user:ci")
    assert record.actor.startswith("cli:") and record.detail["token_id"] == token.pk
    me = bearer(secret).get("/api/v1/me").json()
    assert (me["username"], me["role"], me["auth"]) == ("ci", "viewer", "token")  # capped below operator
    assert bearer(secret).post("/api/v1/resources/1/reconcile", {"reason": "x"}, format="json").status_code == 403


def test_refused_creates_are_errors_and_on_the_record():
    f.user("ci", "viewer")
    with pytest.raises(CommandError, match="no such user"):
        run("create", "--user", "nobody")
    assert (last_record().action, last_record().status_code, last_record().target) == ("token.create", 404,
                                                                                        "user:nobody")
    with pytest.raises(CommandError, match="cannot have more than its user's role"):
        run("create", "--user", "ci", "--role", "admin")
    assert (last_record().outcome, last_record().status_code) == ("refused", 403)
    with pytest.raises(CommandError, match="positive number with a unit"):
        run("create", "--user", "ci", "--expires", "soon")
    assert last_record().outcome == "rejected" and ApiToken.objects.count() == 0


def test_list_and_revoke():
    ci = f.user("ci", "viewer")
    other = f.user("other", "viewer")
    mine = token_create(ci, name="one")
    token_create(other, name="two")
    old = token_create(ci, name="old", expires_at=timezone.now() - timedelta(days=1))
    out, _ = run("list", "--user", "ci")
    assert "one" in out and "two" not in out and "old" not in out and mine.secret not in out
    assert "expired" in run("list", "--all")[0]
    out, _ = run("revoke", str(mine.token.pk))
    assert "revoked" in out
    response = bearer(mine.secret).get("/api/v1/me")
    assert response.status_code == 401 and response.json()["code"] == "token_revoked"
    record = last_record()
    assert (record.action, record.outcome, record.detail["owner"]) == ("token.revoke", "allowed", "ci")
    with pytest.raises(CommandError, match="no such token"):
        run("revoke", "999999")
    assert (last_record().action, last_record().status_code) == ("token.revoke", 404)
    expired = bearer(old.secret).get("/api/v1/me")
    assert expired.status_code == 401
    assert expired.json()["code"] == "token_expired" and "expired at" in expired.json()["message"]
    assert bearer("oc_nonsense").get("/api/v1/me").json()["code"] == "token_invalid"


@pytest.mark.parametrize(("text", "days"), [("30d", 30), ("2w", 14), ("12h", 0.5), ("30", 30), ("never", None),
                                            ("", None)])
def test_expiry_durations(text, days):
    expected = None if days is None else timedelta(days=days)
    assert token_expiry_parse(text) == expected


@pytest.mark.parametrize("text", ["0d", "-1d", "3x", "4000d", "d"])
def test_bad_expiry_durations(text):
    with pytest.raises(TokenError):
        token_expiry_parse(text)


def test_create_names_the_role_it_is_limited_to_or_the_users_own():
    f.user("ci", "operator")
    _, err = run("create", "--user", "ci", "--name", "plain")
    assert "the user's own role (operator)" in err and "’" not in err
    _, err = run("create", "--user", "ci", "--role", "viewer", "--name", "capped")
    assert ", role viewer," in err
