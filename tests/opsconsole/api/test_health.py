"""/readyz reports each dependency; it answers 503 when a required one (database, Redis, Kubernetes API) fails,
and 200 but degraded while no controller leads; the docs page is served with local Swagger UI assets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from reconcilers.core.meta import rfc3339
from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME

pytestmark = pytest.mark.django_db


def test_readyz_is_200_but_degraded_without_a_leading_controller_and_not_degraded_with_one(kapi, settings):
    settings.OPSCONSOLE_LEADER_NAMESPACE = "default"
    kube.delete_object(kapi, LEASE, "default", LEASE_NAME)
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 200 and body["ready"] is True and body["degraded"] is True
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"] and body["checks"]["kubernetes"]["ok"]
    assert not body["checks"]["controller"]["ok"] and body["checks"]["controller"]["required"] is False
    assert "no controller has led yet" in body["checks"]["controller"]["detail"]

    def lease(renewed: datetime) -> dict:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": LEASE_NAME, "namespace": "default"},
                "spec": {"holderIdentity": "test-holder", "leaseDurationSeconds": 15,
                         "renewTime": rfc3339(renewed, micro=True), "acquireTime": rfc3339(renewed, micro=True)}}

    kube.create_object(kapi, LEASE, lease(datetime.now(UTC) - timedelta(minutes=5)))
    response = Client().get("/readyz")
    expired = response.json()["checks"]["controller"]
    assert response.status_code == 200 and response.json()["degraded"] is True
    assert not expired["ok"] and "expired" in expired["detail"]
    kube.delete_object(kapi, LEASE, "default", LEASE_NAME)
    kube.create_object(kapi, LEASE, lease(datetime.now(UTC)))
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["degraded"] is False
    assert response.json()["checks"]["controller"]["detail"] == "test-holder"
    kube.delete_object(kapi, LEASE, "default", LEASE_NAME)


def test_readyz_is_503_with_an_unreachable_redis(kapi, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 503 and body["ready"] is False
    assert not body["checks"]["redis"]["ok"] and body["checks"]["redis"]["required"] is True


def test_swagger_ui_is_served_from_local_assets(admin_client):
    html = admin_client.get("/api/v1/docs").content.decode()
    assert "swagger-ui" in html and "cdn.jsdelivr" not in html and "/static/drf_spectacular_sidecar/" in html
    assert admin_client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").status_code == 200
