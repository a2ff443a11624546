"""A token's role cap and expiry, as an attacker holding a capped token would try them: a superuser's token made
with `manage.py token create --role viewer` acts as a viewer (no action record, no reconcile, no queue control,
no token above viewer, no token for anyone else); a capped or expiring token mints no token above its cap or past
its expiry (a 403 naming the field, recorded as refused, no token made), and a token it mints without asking
inherits its cap and its expiry."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from opsconsole.accounts.models import ApiToken
from opsconsole.accounts.tokens import token_create
from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def _bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _last() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_a_superusers_token_capped_to_viewer_reads_no_actions_asks_no_reconcile_and_mints_no_token(queue):
    root = User.objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", password="pw")
    colleague = f.user(f"colleague-{uuid.uuid4().hex[:6]}", "viewer")
    out = io.StringIO()
    call_command("token", "create", "--user", root.username, "--role", "viewer", "--name", "capped",
                 stdout=out, stderr=io.StringIO())
    client = _bearer(out.getvalue().strip())
    res = f.resource("capped-target", "team-a")

    assert client.get("/api/v1/me").json()["role"] == "viewer"
    assert client.get(f"/api/v1/resources/{res.pk}").status_code == 200  # a viewer reads
    assert client.get("/api/v1/actions").status_code == 403
    reconcile = client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "as root"}, format="json")
    assert reconcile.status_code == 403 and queue.sent.keys == []
    assert (_last().action, _last().outcome, _last().actor) == ("resource.reconcile", "refused", root.username)
    retry = client.post("/api/v1/queue/retry-now", {"key": "/v1/pods/team-a/x"}, format="json")
    assert retry.status_code == 403
    tokens_before = ApiToken.objects.count()
    above = client.post("/api/v1/tokens", {"name": "escalate", "role": "admin"}, format="json")
    assert above.status_code == 403 and "role" in above.json()["fields"]
    assert (_last().action, _last().outcome, _last().auth) == ("token.create", "refused", "token")
    for_other = client.post("/api/v1/tokens", {"name": "theirs", "username": colleague.username}, format="json")
    assert for_other.status_code == 403
    assert client.get("/api/v1/tokens", {"all": "true"}).status_code == 403
    assert ApiToken.objects.count() == tokens_before
    own = client.post("/api/v1/tokens", {"name": "still-viewer"}, format="json")
    assert own.status_code == 201 and own.json()["role"] == "viewer"
    assert _bearer(own.json()["token"]).get("/api/v1/actions").status_code == 403


def test_a_capped_token_mints_no_token_above_its_cap_and_the_refusal_is_recorded():
    user = f.user(f"op-{uuid.uuid4().hex[:6]}", "admin")
    capped = token_create(user, name="ci", role="viewer")
    client = _bearer(capped.secret)
    tokens_before = ApiToken.objects.count()
    for role in ("operator", "admin"):
        response = client.post("/api/v1/tokens", {"name": f"up-{role}", "role": role, "reason": "escalate"},
                               format="json")
        body = response.json()
        assert response.status_code == 403, body
        assert body["code"] == "permission_denied" and list(body["fields"]) == ["role"]
        record = _last()
        assert (record.action, record.outcome, record.status_code) == ("token.create", "refused", 403)
        assert (record.actor, record.auth, record.token_prefix) == (user.username, "token", capped.token.prefix)
        assert record.target == f"user:{user.username}" and "role" in record.detail["message"]
    assert ApiToken.objects.count() == tokens_before
    unasked = client.post("/api/v1/tokens", {"name": "same"}, format="json")
    assert unasked.status_code == 201 and unasked.json()["role"] == "viewer"
    assert ApiToken.objects.get(pk=unasked.json()["id"]).role == "viewer"


def test_an_expiring_token_mints_no_token_that_outlives_it():
    user = f.user(f"op-{uuid.uuid4().hex[:6]}", "operator")
    expiring = token_create(user, name="short", expires_at=timezone.now() + timedelta(hours=2))
    client = _bearer(expiring.secret)
    tokens_before = ApiToken.objects.count()
    longer = client.post("/api/v1/tokens", {"name": "longer", "expires_in_days": 30}, format="json")
    assert longer.status_code == 403 and list(longer.json()["fields"]) == ["expires_in_days"]
    assert (_last().action, _last().outcome, _last().token_prefix) == ("token.create", "refused",
                                                                        expiring.token.prefix)
    assert ApiToken.objects.count() == tokens_before
    unasked = client.post("/api/v1/tokens", {"name": "same-end"}, format="json")
    assert unasked.status_code == 201
    minted = ApiToken.objects.get(pk=unasked.json()["id"])
    assert minted.expires_at == expiring.token.expires_at and minted.role == ""


def test_a_session_and_an_uncapped_token_mint_as_before(as_user):
    admin = as_user("admin")
    made = admin.post("/api/v1/tokens", {"name": "long", "expires_in_days": 365, "role": "operator"}, format="json")
    assert made.status_code == 201 and made.json()["role"] == "operator"
    plain = _bearer(token_create(admin.user, name="plain").secret)
    again = plain.post("/api/v1/tokens", {"name": "forever"}, format="json")
    assert again.status_code == 201 and again.json()["role"] == "" and again.json()["expires_at"] is None
