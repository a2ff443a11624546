"""Issue 41: readiness per cluster. Each registered, non-removed cluster has a `cluster:<name>` check saying
whether its controller's heartbeat is fresh; an unreachable cluster (or another cluster whose controller never
reported) makes /readyz degraded, never unready: the web keeps serving every cluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from reconcilers.models import Cluster
from reconcilers.services import readiness
from reconcilers.services.readiness import ClusterNotFresh, cluster_checks

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def outcome(name: str) -> str:
    return cluster_checks(NOW)[f"cluster:{name}"]()


def test_a_fresh_heartbeat_is_ok_and_an_old_one_or_a_lost_api_server_is_not():
    Cluster.objects.create(name="b", heartbeat_at=NOW - timedelta(seconds=3), leader="ctl-b-0")
    assert outcome("b") == "heartbeat 3s ago, leader ctl-b-0"
    Cluster.objects.filter(name="b").update(heartbeat_at=NOW - timedelta(minutes=5))
    with pytest.raises(ClusterNotFresh, match="unreachable since 2026-12-07T11:55"):
        outcome("b")
    Cluster.objects.filter(name="b").update(heartbeat_at=NOW, unreachable_since=NOW - timedelta(seconds=30))
    with pytest.raises(ClusterNotFresh, match="API server lost"):
        outcome("b")


def test_a_removed_cluster_has_no_check_and_only_another_cluster_must_have_reported():
    Cluster.objects.create(name="gone", removed_at=NOW)
    Cluster.objects.create(name="new")
    checks = cluster_checks(NOW)
    assert "cluster:gone" not in checks and "cluster:default" in checks
    assert "Lease" in checks["cluster:default"]()  # the default cluster before its controller's first report
    with pytest.raises(ClusterNotFresh, match="not reported"):
        checks["cluster:new"]()


def test_readyz_stays_ready_and_says_degraded_with_an_unreachable_cluster(kapi, monkeypatch):
    monkeypatch.setitem(readiness.CHECKS, "controller", lambda: "test-holder")  # a leader: only clusters degrade
    Cluster.objects.filter(name="default").update(heartbeat_at=timezone.now(), leader="ctl-0")
    response = Client().get("/readyz")
    assert response.status_code == 200 and response.json()["degraded"] is False
    assert response.json()["checks"]["cluster:default"]["ok"] is True
    Cluster.objects.create(name="b", heartbeat_at=timezone.now() - timedelta(hours=1))
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 200 and body["ready"] is True and body["degraded"] is True
    assert body["checks"]["cluster:b"]["ok"] is False and body["checks"]["cluster:b"]["required"] is False
    assert "unreachable since" in body["checks"]["cluster:b"]["detail"]
    assert body["checks"]["cluster:default"]["ok"] is True
