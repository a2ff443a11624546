"""The console's API tokens page: create (shown once, with a copy button, usable at once), list and revoke
one's own; admins see and revoke the tokens of users within their namespaces, and no one else's; every create
and revoke, refused ones too, on the action record; the navigation links the page and the API docs."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from opsconsole.accounts.models import ApiToken
from opsconsole.accounts.tokens import token_create
from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories
from tests.opsconsole.console.conftest import csrf_post

pytestmark = pytest.mark.django_db
SECRET_RE = re.compile(r'id="new-token"[^>]*value="(oc_[A-Za-z0-9_-]+)"')


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_the_navigation_links_the_tokens_page_and_the_api_docs(as_role):
    html = as_role("viewer").get("/").content.decode()
    assert 'href="/tokens/"' in html and 'href="/api/v1/docs"' in html


def test_a_token_is_created_shown_once_with_a_copy_button_and_works(as_role):
    client = as_role("operator")
    response = csrf_post(client, "/tokens/create", {"name": "laptop", "description": "my scripts", "expires": "7d",
                                                    "role": "viewer"})
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    html = response.content.decode()
    secret = SECRET_RE.search(html).group(1)
    assert 'id="copy-token"' in html and "/static/js/tokens.js" in html
    token = ApiToken.objects.get(user=client.user)
    assert (token.name, token.description, token.role) == ("laptop", "my scripts", "viewer")
    assert secret not in str(token.__dict__)
    assert abs(token.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/me").json()["role"] == "viewer"
    record = last_record()
    assert (record.action, record.outcome, record.actor, record.detail["prefix"]) == (
        "token.create", "allowed", client.user.username, token.prefix)
    listing = client.get("/tokens/").content.decode()
    assert secret not in listing and token.prefix in listing and "laptop" in listing


@pytest.mark.parametrize(("form", "status", "outcome"), [
    ({"name": "x", "role": "admin", "expires": "30d"}, 403, "refused"),  # more than one's own role
    ({"name": "", "expires": "30d"}, 400, "rejected"),
    ({"name": "x", "expires": "forever"}, 400, "rejected"),
])
def test_a_refused_create_shows_why_and_is_recorded(as_role, form, status, outcome):
    client = as_role("viewer")
    response = csrf_post(client, "/tokens/create", form)
    assert response.status_code == status and 'id="token-error"' in response.content.decode()
    assert (last_record().action, last_record().outcome, last_record().status_code) == ("token.create", outcome,
                                                                                         status)
    assert not ApiToken.objects.exists()


def test_one_revokes_ones_own_token_but_not_anothers(as_role):
    client = as_role("viewer")
    mine = token_create(client.user, name="mine")
    theirs = token_create(factories.user("someone", "viewer"), name="theirs")
    assert "theirs" not in client.get("/tokens/").content.decode()
    response = csrf_post(client, f"/tokens/{mine.token.pk}/revoke", {})
    assert response.status_code == 302
    mine.token.refresh_from_db()
    assert mine.token.revoked_at is not None
    assert (last_record().action, last_record().outcome) == ("token.revoke", "allowed")
    csrf_post(client, f"/tokens/{theirs.token.pk}/revoke", {})
    theirs.token.refresh_from_db()
    assert theirs.token.revoked_at is None
    assert (last_record().action, last_record().status_code, last_record().target) == (
        "token.revoke", 404, f"token:{theirs.token.pk}")


def test_an_admin_sees_and_revokes_tokens_within_their_namespaces_only(as_role):
    admin = as_role("admin", ["team-a"])
    inside = token_create(factories.user("alice", "operator", ["team-a"]), name="alice-ci")
    outside = token_create(factories.user("bob", "operator", ["team-b"]), name="bob-ci")
    unlimited = token_create(factories.user("carol", "viewer"), name="carol-ci")
    html = admin.get("/tokens/").content.decode()
    assert "alice-ci" in html and "bob-ci" not in html and "carol-ci" not in html
    csrf_post(admin, f"/tokens/{inside.token.pk}/revoke", {})
    csrf_post(admin, f"/tokens/{outside.token.pk}/revoke", {})
    csrf_post(admin, f"/tokens/{unlimited.token.pk}/revoke", {})
    revoked = set(ApiToken.objects.filter(revoked_at__isnull=False).values_list("name", flat=True))
    assert revoked == {"alice-ci"}
    records = ActionRecord.objects.filter(action="token.revoke").order_by("id")
    assert [(r.outcome, r.actor) for r in records] == [("allowed", admin.user.username)] + [
        ("rejected", admin.user.username)] * 2


def test_a_user_without_a_role_gets_no_token(as_role):
    client = as_role(None)
    assert client.get("/tokens/").status_code == 403
    assert csrf_post(client, "/tokens/create", {"name": "x", "expires": "30d"}).status_code == 403
    assert (last_record().action, last_record().outcome) == ("token.create", "refused")
    assert not ApiToken.objects.exists()
