"""An action by database id on a resource outside one's namespaces, as a namespace-limited operator and admin
walking ids would try it: every by-id action of the API (reconcile, rollback, suspend, resume, pin, unpin) and of
the console answers 404 with the same body as an id that does not exist, naming no namespace, recorded with the
target `resource:<id>`; nothing is requested or annotated."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from reconcilers.models import ActionRecord, HealingRecord, ReconcileRequest
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
BODY = {"reason": "walking ids", "generation": 1}
API_ACTIONS = ("reconcile", "rollback", "suspend", "resume", "pin", "unpin")
CONSOLE_ACTIONS = ("reconcile", "rollback", "suspend", "resume", "pin", "unpin")


def _client(role: str, namespaces: list[str]) -> Client:
    client = Client()
    client.force_login(f.user(f"{role}-{uuid.uuid4().hex[:6]}", role, namespaces))
    return client


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_an_api_action_by_id_outside_ones_namespaces_is_a_404_naming_no_namespace(queue, role):
    secret_ns = f"secret-{uuid.uuid4().hex[:8]}"
    hidden = f.resource("hidden", secret_ns)
    client = _client(role, ["team-a"])
    missing = client.post("/api/v1/resources/999999999/reconcile", BODY, content_type="application/json")
    for action in API_ACTIONS:
        response = client.post(f"/api/v1/resources/{hidden.pk}/{action}", BODY, content_type="application/json")
        assert response.status_code == 404, (action, response.content)
        assert secret_ns not in response.content.decode(), action
        assert json.loads(response.content)["message"] == json.loads(missing.content)["message"], action
        record = ActionRecord.objects.order_by("-id").first()
        assert (record.status_code, record.target) == (404, f"resource:{hidden.pk}"), action
    assert not ReconcileRequest.objects.filter(resource=hidden).exists() and queue.sent.keys == []
    assert not HealingRecord.objects.filter(resource=hidden).exists()


def test_a_console_action_by_id_outside_ones_namespaces_is_a_404_naming_no_namespace(queue):
    secret_ns = f"secret-{uuid.uuid4().hex[:8]}"
    hidden = f.resource("hidden", secret_ns)
    client = _client("operator", ["team-a"])
    for action in CONSOLE_ACTIONS:
        response = client.post(f"/resources/{hidden.pk}/{action}", {**BODY, "duration": ""})
        assert response.status_code == 404, action
        assert secret_ns not in response.content.decode(), action
        record = ActionRecord.objects.order_by("-id").first()
        assert (record.status_code, record.target) == (404, f"resource:{hidden.pk}"), action
    assert not ReconcileRequest.objects.filter(resource=hidden).exists() and queue.sent.keys == []
