"""Resource endpoints by Kubernetes key and by uid: namespaced (Memcached) and cluster-scoped (Tenant), the Kind
in any spelling, not found, namespace limits (404 across namespaces, as by id), the live row winning over a
deleted one, and a reconcile asked by key (the request and the action record, refusals included)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import ActionRecord, ReconcileRequest, Resource
from tests.opsconsole.api import factories as f

MC = "/api/v1/kinds/cache.example.com/{kind}/namespaces/{ns}/{name}"
TENANT = "/api/v1/kinds/tenancy.example.com/{kind}/{name}"


@pytest.mark.django_db
def test_a_namespaced_resource_answers_by_key_in_every_spelling_of_its_kind_and_by_uid(viewer):
    res = f.resource("web", "shop")
    f.transition(res, "Pending", run=f.run(res))
    f.transition(res, "Running")
    for kind in ("Memcached", "memcached", "memcacheds", "MEMCACHEDS"):
        response = viewer.get(MC.format(kind=kind, ns="shop", name="web"))
        assert response.status_code == 200, response.content
        assert response.json()["id"] == res.pk and response.json()["phase"] == "Running"
    def same(body: dict) -> dict:
        return {k: v for k, v in body.items() if k != "time_in_phase_seconds"}

    by_uid = viewer.get(f"/api/v1/resources/by-uid/{res.uid}")
    assert same(by_uid.json()) == same(viewer.get(f"/api/v1/resources/{res.pk}").json())
    for base in (MC.format(kind="memcacheds", ns="shop", name="web"), f"/api/v1/resources/by-uid/{res.uid}"):
        history = viewer.get(f"{base}/transitions").json()["results"]
        assert [t["to_phase"] for t in history] == ["Running", "Pending"]
        assert len(viewer.get(f"{base}/reconciles").json()["results"]) == 1


@pytest.mark.django_db
def test_a_cluster_scoped_resource_answers_by_key_without_a_namespace(viewer):
    res = f.resource("acme", kind=f.TENANT, phase="Active")
    f.transition(res, "Active")
    response = viewer.get(TENANT.format(kind="Tenant", name="acme"))
    assert response.status_code == 200 and response.json()["id"] == res.pk
    assert viewer.get(TENANT.format(kind="tenants", name="acme") + "/transitions").json()["results"][0][
        "to_phase"] == "Active"
    # the namespaced form does not name a cluster-scoped object, nor the cluster form a namespaced one
    assert viewer.get("/api/v1/kinds/tenancy.example.com/Tenant/namespaces/default/acme").status_code == 404
    f.resource("web", "shop")
    assert viewer.get("/api/v1/kinds/cache.example.com/Memcached/web").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("path", [
    "/api/v1/kinds/cache.example.com/Gizmo/namespaces/shop/web",  # unknown kind
    "/api/v1/kinds/other.example.com/Memcached/namespaces/shop/web",  # wrong group
    "/api/v1/kinds/cache.example.com/Memcached/namespaces/shop/nope",  # unknown name
    "/api/v1/kinds/cache.example.com/Memcached/namespaces/elsewhere/web",  # wrong namespace
    "/api/v1/kinds/cache.example.com/Memcached/namespaces/shop/nope/transitions",
    "/api/v1/kinds/core/Memcached/namespaces/shop/web",
    "/api/v1/resources/by-uid/00000000-0000-0000-0000-000000000000",
    "/api/v1/resources/by-uid/00000000-0000-0000-0000-000000000000/reconciles",
])
def test_what_names_no_object_is_a_404_in_the_error_shape(viewer, path):
    f.resource("web", "shop")
    response = viewer.get(path)
    assert response.status_code == 404
    assert response.json()["status"] == 404 and response.json()["code"] == "not_found"


@pytest.mark.django_db
def test_a_user_limited_to_a_namespace_gets_404_for_another_namespaces_object_by_key_and_uid(as_user):
    client = as_user("operator", ["shop"])
    mine, theirs = f.resource("web", "shop"), f.resource("web", "bank")
    assert client.get(MC.format(kind="Memcached", ns="shop", name="web")).json()["id"] == mine.pk
    for path in (MC.format(kind="Memcached", ns="bank", name="web"), f"/api/v1/resources/by-uid/{theirs.uid}"):
        for sub in ("", "/transitions", "/reconciles", "/events"):
            assert client.get(path + sub).status_code == 404, path + sub
        response = client.post(path + "/reconcile", {"reason": "try"}, format="json")
        assert response.status_code == 404
        record = ActionRecord.objects.order_by("-id").first()
        assert (record.action, record.actor, record.status_code) == ("resource.reconcile", client.user.username, 404)
    assert client.get(f"/api/v1/resources/{theirs.pk}").status_code == 404  # as by id
    assert ReconcileRequest.objects.count() == 0
    tenant = f.resource("acme", kind=f.TENANT)
    assert client.get(TENANT.format(kind="Tenant", name="acme")).status_code == 404  # no cluster-scope grant
    assert as_user("viewer", [""]).get(TENANT.format(kind="Tenant", name="acme")).json()["id"] == tenant.pk


@pytest.mark.django_db
def test_the_live_row_wins_over_deleted_ones_else_the_newest(viewer):
    now = timezone.now()
    old = f.resource("web", "shop", deleted=True, deleted_at=now - timedelta(hours=2))
    live = f.resource("web", "shop")
    newer_deleted = f.resource("web", "shop", deleted=True, deleted_at=now)
    Resource.objects.filter(pk=old.pk).update(created_at=now - timedelta(hours=3))
    Resource.objects.filter(pk=live.pk).update(created_at=now - timedelta(hours=2))
    Resource.objects.filter(pk=newer_deleted.pk).update(created_at=now - timedelta(hours=1))
    path = MC.format(kind="Memcached", ns="shop", name="web")
    assert viewer.get(path).json()["id"] == live.pk
    Resource.objects.filter(pk=live.pk).update(deleted=True, deleted_at=now)
    assert viewer.get(path).json()["id"] == newer_deleted.pk
    assert viewer.get(f"/api/v1/resources/by-uid/{old.uid}").json()["id"] == old.pk  # a uid names one row


@pytest.mark.django_db(transaction=True)
def test_a_reconcile_asked_by_key_makes_a_request_and_an_action_record_as_by_id(kapi, queue, reconcilers, as_user):
    from tests.opsconsole.api.test_actions import Cluster

    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    cluster = Cluster(kapi)
    res = cluster.gadget(cluster.inside, "g1")
    operator = as_user("operator", [cluster.inside], token=True)
    base = f"/api/v1/kinds/{res.group}/{res.kind}/namespaces/{res.namespace}/{res.name}"
    response = operator.post(f"{base}/reconcile", {"reason": "by key"}, format="json",
                             HTTP_IDEMPOTENCY_KEY="deploy-7")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["state"], body["reason"], body["actor"]) == ("requested", "by key", f"user:{operator.user.username}")
    assert cluster.annotation(res) == body["token"] and queue.sent.keys == [res.key]
    req = ReconcileRequest.objects.get()
    assert req.resource_id == res.pk
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.action, record.outcome, record.status_code, record.reason, record.target, record.auth) == (
        "resource.reconcile", "allowed", 202, "by key", res.key, "token")
    assert record.detail["request_id"] == body["id"]
    again = operator.post(f"/api/v1/resources/by-uid/{res.uid}/reconcile", {"reason": "by key"}, format="json",
                          HTTP_IDEMPOTENCY_KEY="deploy-7")
    assert again.status_code == 202 and again.json()["id"] == body["id"] and ReconcileRequest.objects.count() == 1
    # refusals are recorded as by id: a viewer (403) and a missing reason (400)
    viewer = as_user("viewer", [cluster.inside])
    assert viewer.post(f"{base}/reconcile", {"reason": "no"}, format="json").status_code == 403
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.actor, record.outcome, record.status_code) == (viewer.user.username, "refused", 403)
    assert operator.post(f"{base}/reconcile", {}, format="json").status_code == 400
    assert ActionRecord.objects.order_by("-id").first().outcome == "rejected"
    assert ReconcileRequest.objects.count() == 1


@pytest.mark.django_db
def test_the_spec_revisions_answer_by_key_and_uid_within_ones_namespaces(as_user):
    from tests.opsconsole.api.test_revisions import revise

    res = f.resource("rv", "shop")
    revise(res, 1, {"size": 1}, "kubectl-client-side-apply", "2030-01-01T00:00:00Z")
    revise(res, 2, {"size": 4}, "kubectl-edit", "2030-01-01T00:01:00Z")
    client = as_user("viewer", ["shop"])
    for base in (MC.format(kind="memcacheds", ns="shop", name="rv"), f"/api/v1/resources/by-uid/{res.uid}"):
        body = client.get(f"{base}/revisions?from=1&to=2").json()
        assert [r["generation"] for r in body["results"]] == [2, 1] and body["compare"]["from"] == 1
    assert as_user("viewer", ["bank"]).get(f"/api/v1/resources/by-uid/{res.uid}/revisions").status_code == 404
