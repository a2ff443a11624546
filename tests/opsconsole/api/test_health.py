"""/readyz reports each dependency and answers 503 until a controller leads; the docs page is served with
local Swagger UI assets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME, micro_time

pytestmark = pytest.mark.django_db


def test_readyz_is_503_without_a_leading_controller_and_200_with_one(kapi, settings):
    settings.OPSCONSOLE_LEADER_NAMESPACE = "default"
    kube.delete_object(kapi, LEASE, "default", LEASE_NAME)
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 503 and body["ready"] is False
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"] and body["checks"]["kubernetes"]["ok"]
    assert not body["checks"]["controller"]["ok"]

    def lease(renewed: datetime) -> dict:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": LEASE_NAME, "namespace": "default"},
                "spec": {"holderIdentity": "test-holder", "leaseDurationSeconds": 15,
                         "renewTime": micro_time(renewed), "acquireTime": micro_time(renewed)}}

    kube.create_object(kapi, LEASE, lease(datetime.now(UTC) - timedelta(minutes=5)))
    expired = Client().get("/readyz").json()["checks"]["controller"]
    assert not expired["ok"] and "expired" in expired["detail"]
    kube.delete_object(kapi, LEASE, "default", LEASE_NAME)
    kube.create_object(kapi, LEASE, lease(datetime.now(UTC)))
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"]["controller"]["detail"] == "test-holder"
    kube.delete_object(kapi, LEASE, "default", LEASE_NAME)


def test_readyz_reports_an_unreachable_redis(kapi, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    body = Client().get("/readyz").json()
    assert body["ready"] is False and not body["checks"]["redis"]["ok"]


def test_swagger_ui_is_served_from_local_assets(admin_client):
    html = admin_client.get("/api/v1/docs").content.decode()
    assert "swagger-ui" in html and "cdn.jsdelivr" not in html and "/static/drf_spectacular_sidecar/" in html
    assert admin_client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").status_code == 200
