"""API tokens: created and shown once, stored as sha256, used as Bearer, last-used time, revocable (own; any
for admins), expiring; who-am-I; the roles exist as groups."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from opsconsole.accounts.models import ApiToken
from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_the_roles_are_created_by_a_data_migration():
    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "operator", "admin"}


def test_a_token_is_shown_once_stored_hashed_used_and_revoked(viewer):
    response = viewer.post("/api/v1/tokens", {"name": "ci"}, format="json")
    assert response.status_code == 201
    body = response.json()
    secret = body["token"]
    assert secret.startswith("oc_") and len(secret) >= 40 and body["prefix"] == secret[:9]
    stored = ApiToken.objects.get(pk=body["id"])
    assert stored.hash == hashlib.sha256(secret.encode()).hexdigest() and secret not in str(stored.__dict__)
    listed = viewer.get("/api/v1/tokens").json()
    assert [t["id"] for t in listed] == [body["id"]] and "token" not in listed[0]
    assert listed[0]["last_used_at"] is None

    script = bearer(secret)
    me = script.get("/api/v1/me").json()
    assert (me["username"], me["role"], me["auth"]) == (viewer.user.username, "viewer", "token")
    stored.refresh_from_db()
    assert stored.last_used_at is not None

    assert viewer.delete(f"/api/v1/tokens/{body['id']}").status_code == 204
    assert script.get("/api/v1/me").status_code == 401
    assert [r.action for r in ActionRecord.objects.order_by("id")] == ["token.create", "token.revoke"]


def test_an_expired_token_is_refused(viewer):
    from opsconsole.accounts.tokens import token_create

    issued = token_create(viewer.user, name="old", expires_at=timezone.now() - timedelta(seconds=1))
    assert bearer(issued.secret).get("/api/v1/me").status_code == 401


def test_users_see_and_revoke_only_their_own_tokens_admins_anyones(viewer, operator, admin):
    mine = viewer.post("/api/v1/tokens", {"name": "mine"}, format="json").json()
    assert operator.delete(f"/api/v1/tokens/{mine['id']}").status_code == 404
    assert operator.get("/api/v1/tokens").json() == []
    assert operator.get("/api/v1/tokens", {"all": "true"}).status_code == 403
    assert [t["id"] for t in admin.get("/api/v1/tokens", {"all": "true"}).json()] == [mine["id"]]
    assert [t["id"] for t in admin.get("/api/v1/tokens", {"username": viewer.user.username}).json()] == [mine["id"]]
    assert admin.delete(f"/api/v1/tokens/{mine['id']}").status_code == 204
    assert viewer.get("/api/v1/tokens").json()[0]["active"] is False


def test_admins_create_tokens_for_others_and_operators_cannot(operator, admin):
    target = f.user("script-user", "viewer")
    response = admin.post("/api/v1/tokens", {"name": "for-script", "username": "script-user"}, format="json")
    assert response.status_code == 201 and response.json()["username"] == "script-user"
    assert operator.post("/api/v1/tokens", {"name": "x", "username": "script-user"}, format="json").status_code == 403
    assert admin.post("/api/v1/tokens", {"name": "x", "username": "nobody"}, format="json").json()["fields"]["username"]
    assert ApiToken.objects.filter(user=target).count() == 1
    assert ActionRecord.objects.filter(action="token.create", outcome="refused").count() == 1


def test_a_user_without_a_role_or_inactive_gets_nothing(as_user):
    client = as_user(None)
    assert client.get("/api/v1/resources").status_code == 403
    assert client.get("/api/v1/resources").json()["code"] == "permission_denied"
    viewer = as_user("viewer", token=True)
    viewer.user.is_active = False
    viewer.user.save()
    assert viewer.get("/api/v1/resources").status_code == 401


def test_a_malformed_authorization_header_is_a_401_not_a_500():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer a b")
    assert client.get("/api/v1/me").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Bearer " + "x" * 5000)
    assert client.get("/api/v1/me").status_code == 401
