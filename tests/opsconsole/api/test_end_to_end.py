"""A manual reconcile requested through the API, handled end to end by the real engine (kubesim, the
controller process and Celery worker processes): 202, the annotation set, the request picked up and
succeeded, `status.lastHandledReconcileAt` echoing its token."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from kubesim.testing import wait_for
from reconcilers.core.meta import RECONCILE_REQUESTED_AT as ANNOTATION
from reconcilers.engine import kube
from reconcilers.models import Resource
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.integration


def test_a_manual_reconcile_through_the_api_is_handled_by_a_real_worker(integration, kapi, namespace):  # noqa: F811
    kube.create_object(kapi, GADGET, gadget(namespace, "e2e", mode="ok"))
    resource = wait_for(lambda: Resource.objects.filter(namespace=namespace, name="e2e", phase="Running").first(),
                        timeout=60, interval=0.2)
    client = APIClient()
    user = f.user("e2e-operator", "operator", [namespace])
    from opsconsole.accounts.tokens import token_create

    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user, name='e2e').secret}")
    response = client.post(f"/api/v1/resources/{resource.pk}/reconcile", {"reason": "end to end"}, format="json")
    assert response.status_code == 202, response.content
    request = response.json()
    live = kube.get_object(kapi, GADGET, namespace, "e2e")
    assert live["metadata"]["annotations"][ANNOTATION] == request["token"]

    def handled() -> dict | None:
        body = client.get(f"/api/v1/reconcile-requests/{request['id']}").json()
        return body if body["state"] in ("succeeded", "failed") else None

    body = wait_for(handled, timeout=60, interval=0.2)
    assert body["state"] == "succeeded", body
    assert body["picked_up_at"] and body["finished_at"] and body["run"]["result"] == "success"
    assert body["run"]["request_id"] == request["id"]
    live = kube.get_object(kapi, GADGET, namespace, "e2e")
    assert live["status"]["lastHandledReconcileAt"] == request["token"]
