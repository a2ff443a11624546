"""Escalation in the API: an operator acknowledges, assigns and resolves an anomaly that needs a person, by id, by
key and by uid; each step is a healing record the chain verifies and an action record; bad input is a 4xx naming
the field; a viewer is refused and the refusal recorded; the healing endpoint shows who acknowledged and each
record's deliveries."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from reconcilers.engine.audit import chain_verify
from reconcilers.engine.healing import rollback
from reconcilers.models import ActionRecord, HealingAction, HealingRecord, NotificationDelivery, Resource
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def _anomalous(rule: str = "stuck") -> Resource:
    res = f.resource(phase="Pending")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=res.pk)
        rollback.anomaly_raise_locked(row, rule, f"{rule} matched", timezone.now())
        row.save()
    return row


def _last() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_acknowledge_assign_and_resolve_by_id_key_and_uid(operator, queue, settings):
    settings.OPSCONSOLE_NOTIFICATIONS = [{"name": "am", "url": "http://127.0.0.1:9/", "format": "alertmanager"}]
    res = _anomalous()
    bob = f.user("bob", "operator")
    me = operator.user.username

    response = operator.post(f"/api/v1/resources/{res.pk}/anomalies/stuck/acknowledge", {"note": "on it"},
                             format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["action"], body["actor"], body["rule"], body["reason"]) == (
        "anomaly.acknowledged", f"user:{me}", "stuck", "on it")
    action = _last()
    assert (action.action, action.outcome, action.status_code, action.target) == (
        "anomaly.acknowledge", "allowed", 202, res.key)
    assert action.detail["rule"] == "stuck" and action.detail["note"] == "on it"

    by_key = f"/api/v1/kinds/cache.example.com/memcacheds/namespaces/{res.namespace}/{res.name}/anomalies/stuck"
    response = operator.post(f"{by_key}/assign", {"assignee": bob.username}, format="json")
    assert response.status_code == 202, response.content
    res.refresh_from_db()
    assert res.active_anomalies["stuck"]["assignee"]["to"] == "user:bob"
    assert res.active_anomalies["stuck"]["acknowledged"]["by"] == f"user:{me}"

    summary = operator.get(f"/api/v1/resources/{res.pk}/healing").json()
    [anomaly] = summary["anomalies"]
    assert anomaly["needs_person"] is True and anomaly["acknowledged"]["note"] == "on it"
    detected = next(r for r in summary["records"] if r["action"] == "anomaly.detected")
    assert [(d["receiver"], d["state"], d["attempts"]) for d in detected["deliveries"]] == [("am", "pending", 0)]

    response = operator.post(f"/api/v1/resources/by-uid/{res.uid}/anomalies/stuck/resolve",
                             {"note": "fixed the image tag"}, format="json")
    assert response.status_code == 202, response.content
    res.refresh_from_db()
    assert res.active_anomalies == {}
    assert res.anomalies_resolved["stuck"]["record"] == response.json()["seq"]
    assert queue.sent.keys == [res.key]
    actions = list(HealingRecord.objects.filter(resource=res).order_by("seq").values_list("action", "actor"))
    assert actions == [("anomaly.detected", "controller"), ("anomaly.acknowledged", f"user:{me}"),
                       ("anomaly.assigned", f"user:{me}"), ("anomaly.resolved", f"user:{me}")]
    assert NotificationDelivery.objects.count() == 1  # the anomaly.detected of a rule that does not roll back
    report = chain_verify()
    assert report.ok, [b.describe() for b in report.breaks]


def test_bad_input_names_the_field(operator, queue):
    res = _anomalous()
    viewer_user = f.user("vic", "viewer")
    url = f"/api/v1/resources/{res.pk}/anomalies"
    cases = [
        (f"{url}/stuck/resolve", {"note": ""}, 400, "note"),
        (f"{url}/stuck/resolve", {}, 400, "note"),
        (f"{url}/stuck/assign", {"assignee": "ghost"}, 400, "assignee"),
        (f"{url}/stuck/assign", {"assignee": viewer_user.username}, 400, "assignee"),  # no operator role
        (f"{url}/no-such-rule/acknowledge", {}, 400, "rule"),
        (f"{url}/flapping/acknowledge", {}, 409, "rule"),  # a rule of the kind, not active
    ]
    for path, body, status, field in cases:
        response = operator.post(path, body, format="json")
        assert response.status_code == status, (path, response.content)
        assert list(response.json()["fields"]) == [field], (path, response.json())
        assert _last().status_code == status
    assert not HealingRecord.objects.filter(resource=res).exclude(action=HealingAction.ANOMALY_DETECTED).exists()


def test_a_viewer_is_refused_and_the_refusal_recorded(viewer):
    res = _anomalous()
    response = viewer.post(f"/api/v1/resources/{res.pk}/anomalies/stuck/acknowledge", {"note": "x"}, format="json")
    assert response.status_code == 403
    action = _last()
    assert (action.action, action.outcome, action.status_code, action.actor) == (
        "anomaly.acknowledge", "refused", 403, viewer.user.username)
    res.refresh_from_db()
    assert "acknowledged" not in res.active_anomalies["stuck"]
    assert not HealingRecord.objects.filter(action=HealingAction.ANOMALY_ACKNOWLEDGED).exists()


def test_another_namespace_is_not_found(as_user):
    res = _anomalous()
    outsider = as_user("operator", ["elsewhere"])
    response = outsider.post(f"/api/v1/resources/{res.pk}/anomalies/stuck/acknowledge", {}, format="json")
    assert response.status_code == 404
    assert _last().status_code == 404
