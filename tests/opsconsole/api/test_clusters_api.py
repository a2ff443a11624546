"""The API across clusters: grants by cluster enforced (a user granted prod/team-a sees nothing of staging nor of
prod's team-b: 404 by id, uid and cluster key, empty lists, /clusters without staging), the cluster routes (the
`kinds/…` routes still the default cluster's), the `cluster` and `cluster_label` filters (bad ones a 400 naming
the field), `cluster` on every payload, /clusters with health, `reachable` and counts, and a reconcile asked by
cluster key going to that cluster's object (its key with the cluster's prefix, the record's cluster)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from opsconsole.api import actions
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db

MC = "cache.example.com/Memcached"


def by_key(cluster: str, ns: str, name: str) -> str:
    return f"/api/v1/clusters/{cluster}/kinds/{MC}/namespaces/{ns}/{name}"


@pytest.fixture
def estate():
    """prod (env=prod) and staging (env=staging) registered; an object named web in prod/team-a, prod/team-b,
    staging/team-a and the default cluster's team-a, each with a transition and a run."""
    f.cluster("prod", labels={"env": "prod"}, heartbeat_at=timezone.now())
    f.cluster("staging", labels={"env": "staging"})
    rows = {}
    for cluster, ns in (("prod", "team-a"), ("prod", "team-b"), ("staging", "team-a"), ("default", "team-a")):
        res = f.resource("web", ns, cluster=cluster)
        f.transition(res, "Running", run=f.run(res))
        rows[(cluster, ns)] = res
    return rows


def test_a_user_granted_prod_team_a_sees_nothing_of_staging_nor_of_prod_team_b(as_user, estate):
    client = as_user("operator", ["prod/team-a"])
    mine = estate[("prod", "team-a")]
    assert [r["id"] for r in client.get("/api/v1/resources").json()["results"]] == [mine.pk]
    assert {t["resource_id"] for t in client.get("/api/v1/transitions").json()["results"]} == {mine.pk}
    assert [c["name"] for c in client.get("/api/v1/clusters").json()] == ["prod"]
    assert client.get(by_key("prod", "team-a", "web")).json()["id"] == mine.pk
    for (cluster, ns), res in estate.items():
        if res == mine:
            continue
        for path in (f"/api/v1/resources/{res.pk}", f"/api/v1/resources/by-uid/{res.uid}",
                     by_key(cluster, ns, "web")):
            for sub in ("", "/transitions", "/reconciles", "/revisions", "/explain"):
                assert client.get(path + sub).status_code == 404, path + sub
            assert client.post(path + "/reconcile", {"reason": "no"}, format="json").status_code == 404
    assert client.get(f"/api/v1/kinds/{MC}/namespaces/team-a/web").status_code == 404  # the default cluster's
    staging = client.get(by_key("staging", "team-a", "web"))
    assert staging.json()["fields"] == {"cluster": ["No such cluster: staging"]}
    assert client.get("/api/v1/clusters/staging").status_code == 404
    assert client.get("/api/v1/resources", {"cluster": "staging"}).json()["results"] == []
    assert ReconcileRequest.objects.count() == 0


def test_an_unknown_cluster_answers_404_naming_it_as_an_invisible_one_does(admin, estate):
    for path in (by_key("nowhere", "team-a", "web"), "/api/v1/clusters/nowhere",
                 f"/api/v1/clusters/nowhere/kinds/{MC}/web/transitions"):
        response = admin.get(path)
        assert response.status_code == 404, path
        assert response.json()["fields"] == {"cluster": ["No such cluster: nowhere"]}


def test_the_cluster_routes_name_the_object_of_that_cluster_and_kinds_routes_the_default_one(viewer, estate):
    prod, default = estate[("prod", "team-a")], estate[("default", "team-a")]
    body = viewer.get(by_key("prod", "team-a", "web")).json()
    assert (body["id"], body["cluster"], body["key"]) == (prod.pk, "prod", prod.key)
    assert prod.key.startswith("prod/cache.example.com/")
    assert viewer.get(f"/api/v1/kinds/{MC}/namespaces/team-a/web").json()["id"] == default.pk
    assert viewer.get(by_key("default", "team-a", "web")).json()["id"] == default.pk
    transitions = viewer.get(by_key("prod", "team-a", "web") + "/transitions").json()["results"]
    assert [(t["resource_id"], t["cluster"]) for t in transitions] == [(prod.pk, "prod")]
    runs = viewer.get(by_key("staging", "team-a", "web") + "/reconciles").json()["results"]
    assert [r["cluster"] for r in runs] == ["staging"]
    from reconcilers.models import HealingRecord

    HealingRecord.objects.create(resource=prod, cluster="prod", seq=1, action="suspended", actor="user:x",
                                 reason="hold", generation=1)
    healing = viewer.get(by_key("prod", "team-a", "web") + "/healing").json()
    assert [r["cluster"] for r in healing["records"]] == ["prod"]
    tenant = f.resource("acme", kind=f.TENANT, cluster="prod")
    assert viewer.get("/api/v1/clusters/prod/kinds/tenancy.example.com/Tenant/acme").json()["id"] == tenant.pk
    assert viewer.get("/api/v1/kinds/tenancy.example.com/Tenant/acme").status_code == 404


def test_lists_filter_by_cluster_and_cluster_label_and_a_bad_filter_names_its_field(viewer, estate):
    def ids(path: str, **query: str) -> set[int]:
        return {r.get("resource_id", r["id"]) for r in viewer.get(path, query).json()["results"]}

    prod = {estate[("prod", "team-a")].pk, estate[("prod", "team-b")].pk}
    assert ids("/api/v1/resources", cluster="prod") == prod
    assert ids("/api/v1/resources", cluster_label="env=prod") == prod
    assert ids("/api/v1/resources", cluster_label="env in (prod,staging)", namespace="team-a") == {
        estate[("prod", "team-a")].pk, estate[("staging", "team-a")].pk}
    assert ids("/api/v1/transitions", cluster="staging") == {estate[("staging", "team-a")].pk}
    assert ids("/api/v1/transitions", cluster="default") == {estate[("default", "team-a")].pk}
    for path in ("/api/v1/resources", "/api/v1/transitions", "/api/v1/reconcile-requests",
                 "/api/v1/transitions.csv"):
        bad = viewer.get(path, {"cluster": "Not_A_Name"})
        assert bad.status_code == 400 and "cluster" in bad.json()["fields"], path
        bad = viewer.get(path, {"cluster_label": "env in prod"})
        assert bad.status_code == 400 and "cluster_label" in bad.json()["fields"], path
    assert viewer.get("/api/v1/clusters", {"cluster_label": "=="}).json()["fields"].keys() == {"cluster_label"}
    csv = b"".join(viewer.get("/api/v1/transitions.csv", {"cluster": "prod"}).streaming_content).decode()
    header, *lines = csv.splitlines()
    assert "cluster" in header.split(",") and len(lines) == 2 and all(",prod," in line for line in lines)


def test_clusters_carry_health_reachable_and_counts_within_the_grant(as_user, estate):
    now = timezone.now()
    f.cluster("prod", labels={"env": "prod"}, heartbeat_at=now, leader="ctl-0", api_requests=200, api_errors=5,
              watch_lag_seconds=0.5, last_list_at=now)
    f.cluster("staging", labels={"env": "staging"}, heartbeat_at=now - timedelta(hours=1))
    admin = as_user("admin")
    listed = {c["name"]: c for c in admin.get("/api/v1/clusters").json()}
    assert set(listed) == {"default", "prod", "staging"}
    prod = listed["prod"]
    assert prod["labels"] == {"env": "prod"} and prod["server"] == "https://prod.example:6443"
    assert (prod["health"]["reachable"], prod["health"]["state"], prod["health"]["leader"]) == (True, "ok", "ctl-0")
    assert prod["health"]["error_rate"] == pytest.approx(0.025) and prod["health"]["watch_lag_seconds"] == 0.5
    assert prod["resources"] == {"total": 2, "phases": {"Running": 2}}
    staging = listed["staging"]
    assert (staging["health"]["reachable"], staging["health"]["state"]) == (False, "unreachable")
    assert staging["health"]["unknown_since"] is not None
    assert listed["default"]["health"]["reachable"] is None  # no report yet
    assert [c["name"] for c in admin.get("/api/v1/clusters", {"cluster_label": "env=prod"}).json()] == ["prod"]
    limited = as_user("viewer", ["prod/team-a", "staging/team-b"])
    seen = {c["name"]: c["resources"]["total"] for c in limited.get("/api/v1/clusters").json()}
    assert seen == {"prod": 1, "staging": 0}
    assert limited.get("/api/v1/clusters/prod").json()["resources"]["total"] == 1


def test_a_reconcile_asked_by_cluster_key_goes_to_that_clusters_object(as_user, estate, monkeypatch):
    asked = []

    def fake_reconcile(resource, **kwargs):
        asked.append(resource)
        return ReconcileRequest.objects.create(resource=resource, cluster=resource.cluster, key=resource.key,
                                               token="t" * 12, actor=kwargs["actor"], reason=kwargs["reason"])

    monkeypatch.setattr(actions, "resource_reconcile", fake_reconcile)
    operator = as_user("operator", ["prod/team-a", "team-b"])
    response = operator.post(by_key("prod", "team-a", "web") + "/reconcile", {"reason": "by cluster"},
                             format="json")
    assert response.status_code == 202, response.json()
    assert asked == [estate[("prod", "team-a")]]
    assert (response.json()["cluster"], response.json()["key"]) == ("prod", estate[("prod", "team-a")].key)
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.action, record.cluster, record.target) == ("resource.reconcile", "prod",
                                                              "prod/cache.example.com/v1alpha1/memcacheds/team-a/web")
    assert operator.post(by_key("staging", "team-b", "nothing") + "/reconcile", {"reason": "x"},
                         format="json").status_code == 404
    actions_seen = operator.get("/api/v1/actions")
    assert actions_seen.status_code == 403  # the action record is admins'
    prod_admin = as_user("admin", ["prod/team-a"])
    assert [r["target"] for r in prod_admin.get("/api/v1/actions").json()["results"]
            if r["action"] == "resource.reconcile" and r["outcome"] == "allowed"] == [record.target]
    assert as_user("admin", ["staging/team-a"]).get("/api/v1/actions").json()["results"] == []


def test_a_bulk_reconcile_takes_a_cluster_and_me_names_the_grants_with_their_cluster(as_user, estate,
                                                                                      monkeypatch):
    asked = []

    def fake_reconcile(resource, **kwargs):
        asked.append(resource)
        return ReconcileRequest.objects.create(resource=resource, cluster=resource.cluster, key=resource.key,
                                               token=f"t{len(asked):011d}", actor=kwargs["actor"],
                                               reason=kwargs["reason"])

    monkeypatch.setattr("reconcilers.services.reconcile_actions.resource_reconcile", fake_reconcile)
    f.resource("web", "team-b", cluster="staging")
    operator = as_user("operator", ["prod/team-a", "team-b"])
    assert operator.get("/api/v1/me").json()["namespaces"] == ["prod/team-a", "team-b"]
    body = {"kind": "Memcached", "phase": "Running", "reason": "bulk", "cluster": "prod"}
    response = operator.post("/api/v1/resources/reconcile", body, format="json")
    assert response.status_code == 202, response.json()
    assert sorted((r.cluster, r.namespace) for r in asked) == [("prod", "team-a"), ("prod", "team-b")]
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.cluster, record.target) == ("prod", "kind=Memcached cluster=prod selector= phase=Running ns=")
    asked.clear()
    response = operator.post("/api/v1/resources/reconcile", {**body, "cluster": ""}, format="json")
    assert response.status_code == 202
    assert sorted((r.cluster, r.namespace) for r in asked) == [("prod", "team-a"), ("prod", "team-b"),
                                                               ("staging", "team-b")]
    bad = operator.post("/api/v1/resources/reconcile", {**body, "cluster": "Bad_Name"}, format="json")
    assert bad.status_code == 400 and "cluster" in bad.json()["fields"]


def test_a_run_log_is_refused_outside_the_runs_cluster(as_user, estate):
    run = f.run(estate[("prod", "team-a")])
    path = f"/api/v1/runs/{run.pk}/log"
    for grants in (["staging/team-a"], [""], ["default/team-a"]):
        response = as_user("viewer", grants).get(path)
        assert response.json()["message"] == "No such run, or it is outside your namespaces.", grants
    assert "not a verbose run" in as_user("viewer", ["prod/team-a"]).get(path).json()["message"]


def test_the_healing_counts_are_over_the_grants_clusters_only(as_user, estate):
    from reconcilers.models import Resource

    Resource.objects.filter(namespace="team-a").update(suspended=True)  # in prod, staging and the default cluster
    assert as_user("viewer", ["prod/team-a"]).get("/api/v1/healing").json()["suspended"] == 1
    assert as_user("viewer", ["team-a"]).get("/api/v1/healing").json()["suspended"] == 3


def test_the_queue_shows_a_limited_user_the_keys_of_its_clusters_namespaces_only(as_user, estate, queue):
    for res in estate.values():
        queue.add(res.key)
    seen = as_user("viewer", ["prod/team-a"]).get("/api/v1/queue").json()
    assert (seen["depth"], [p["key"] for p in seen["pending"]]) == (1, [estate[("prod", "team-a")].key])
    assert as_user("viewer", ["team-a"]).get("/api/v1/queue").json()["depth"] == 3
