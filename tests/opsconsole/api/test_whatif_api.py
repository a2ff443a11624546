"""POST …/whatif: an operator previews a Memcached's replica change by id and by key (the Deployment's diff and the
phase, nothing stored: no run, no transition, resourceVersions unchanged), an invalid spec comes back as admission's
refusal, bad YAML names the field, and every attempt, refused ones included, is an audited action."""

from __future__ import annotations

import pytest

from reconcilers.models import ActionRecord, ReconcileRun, Transition
from reconcilers.models.actions import Outcome
from tests.opsconsole.api import factories as f
from tests.reconcilers.whatif_support import running_memcached, versions

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def mirrored(kapi, namespace, builtin_kinds_only):
    """A Running Memcached in kubesim and its mirror row."""
    _rec, live, phase = running_memcached(kapi, namespace)
    return f.resource("mc", namespace, uid=live["metadata"]["uid"], phase=phase, spec=live["spec"])


def test_an_operator_previews_a_replica_change_and_nothing_is_stored(mirrored, as_user, kapi):
    client = as_user("operator", [mirrored.namespace])
    before = versions(kapi, mirrored.namespace)
    runs, transitions = ReconcileRun.objects.count(), Transition.objects.count()
    response = client.post(f"/api/v1/resources/{mirrored.pk}/whatif", {"yaml": "size: 3\nimage: memcached:1.6\n"},
                           format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["phase"] == "Pending" and body["recorded_phase"] == "Running" and not body["refused"]
    assert body["spec_diff"] == [{"path": "spec.size", "before": 1, "after": 3}]
    deployment = next(c for c in body["children"] if c["kind"] == "Deployment")
    assert {"path": "spec.replicas", "before": 1, "after": 3} in deployment["changes"]
    assert versions(kapi, mirrored.namespace) == before
    assert (ReconcileRun.objects.count(), Transition.objects.count()) == (runs, transitions)
    record = ActionRecord.objects.filter(action="resource.whatif").latest("id")
    assert record.target == mirrored.key and record.outcome == Outcome.ALLOWED
    assert record.detail["spec_diff"] == ["spec.size"] and record.detail["phase"] == "Pending"

    by_key = client.post(f"/api/v1/kinds/cache.example.com/Memcached/namespaces/{mirrored.namespace}/mc/whatif",
                         {"spec": {**mirrored.spec, "size": 2}}, format="json")
    assert by_key.status_code == 200 and by_key.json()["spec_diff"][0]["after"] == 2


def test_an_invalid_spec_shows_the_admission_refusal(mirrored, as_user, kapi):
    client = as_user("operator")
    before = versions(kapi, mirrored.namespace)
    response = client.post(f"/api/v1/resources/{mirrored.pk}/whatif", {"spec": {"size": "many"}}, format="json")
    body = response.json()
    assert response.status_code == 200 and body["refused"] and not body["children"]
    assert any(c["field"] == "spec.size" for c in body["causes"]) and body["admission"][0]["code"] == 422
    assert versions(kapi, mirrored.namespace) == before
    bad = client.post(f"/api/v1/resources/{mirrored.pk}/whatif", {"yaml": "size: [1"}, format="json")
    assert bad.status_code == 400 and "yaml" in bad.json()["fields"]
    neither = client.post(f"/api/v1/resources/{mirrored.pk}/whatif", {}, format="json")
    assert neither.status_code == 400 and "spec" in neither.json()["fields"]


def test_a_viewer_is_refused_and_another_namespace_does_not_exist_and_both_are_audited(mirrored, as_user):
    viewer = as_user("viewer")
    assert viewer.post(f"/api/v1/resources/{mirrored.pk}/whatif", {"spec": {"size": 2}}, format="json"
                       ).status_code == 403
    elsewhere = as_user("operator", ["elsewhere"])
    assert elsewhere.post(f"/api/v1/resources/{mirrored.pk}/whatif", {"spec": {"size": 2}}, format="json"
                          ).status_code == 404
    outcomes = list(ActionRecord.objects.filter(action="resource.whatif").order_by("id")
                    .values_list("status_code", flat=True))
    assert outcomes == [403, 404]
