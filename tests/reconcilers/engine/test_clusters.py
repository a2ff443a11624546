"""Issue 41's controller side without processes: a cluster's registration (identity recorded, then checked; a
removed cluster refused), its keys, mirror rows and sweeps scoped to it, the workers' client per cluster, and its
health report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.types import Result
from reconcilers.engine import apiclient, objectcache
from reconcilers.engine.clusters import (
    ClusterRefused,
    HealthReporter,
    cluster_adopt,
    cluster_identity,
    cluster_register,
)
from reconcilers.engine.controller.events import ADDED, InformerEvent, object_key, owner_keys
from reconcilers.engine.kubeconfig import kubeconfig_with_context
from reconcilers.engine.recording import resource_mirror_sweep, resource_mirror_write
from reconcilers.models import Cluster, Resource
from tests.reconcilers.audit_support import KIND, MACHINE

pytestmark = pytest.mark.django_db

DEPLOYMENTS = ResourceKind("apps", "v1", "deployments", "Deployment", True)


class Plain(Reconciler):
    resource = KIND
    state_machine = MACHINE

    def reconcile(self, ctx: Any, obj: dict[str, Any]) -> Result:
        return Result()


def api_object(uid: str, name: str, namespace: str = "shop", rv: str = "5") -> dict[str, Any]:
    return {"apiVersion": KIND.api_version, "kind": KIND.kind,
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": rv, "generation": 1},
            "spec": {"size": 1}, "status": {}}


# -- registration ----------------------------------------------------------------------------------------------

def test_the_first_controller_records_the_identity_and_a_later_one_of_the_same_cluster_is_let_in():
    row = cluster_register("eu-1", identity="uid-a", server="https://eu-1:6443", context="eu-1")
    assert (row.identity, row.server, row.context, row.removed_at) == ("uid-a", "https://eu-1:6443", "eu-1", None)
    again = cluster_register("eu-1", identity="uid-a", server="https://eu-1.new:6443", context="eu-1b")
    assert again.pk == row.pk and Cluster.objects.get(name="eu-1").server == "https://eu-1.new:6443"
    assert Cluster.objects.get(name="eu-1").context == "eu-1b"


def test_a_controller_pointed_at_another_cluster_is_refused_naming_both_identities():
    cluster_register("eu-1", identity="uid-a", server="https://eu-1:6443")
    with pytest.raises(ClusterRefused) as refused:
        cluster_register("eu-1", identity="uid-b", server="https://us-1:6443")
    assert "uid-a" in str(refused.value) and "uid-b" in str(refused.value) and "us-1" in str(refused.value)
    assert Cluster.objects.get(name="eu-1").identity == "uid-a"  # nothing of the other cluster recorded
    assert Cluster.objects.get(name="eu-1").server == "https://eu-1:6443"


def test_the_default_cluster_row_of_the_migration_takes_its_identity_from_the_first_controller():
    assert Cluster.objects.get(name=DEFAULT_CLUSTER).identity == ""
    assert cluster_register(DEFAULT_CLUSTER, identity="uid-d").identity == "uid-d"
    with pytest.raises(ClusterRefused):
        cluster_register(DEFAULT_CLUSTER, identity="uid-other")


def test_an_adopted_identity_replaces_the_recorded_one_on_the_action_record():
    """`runcontroller --adopt-identity`: a rebuilt cluster (a sandbox started afresh) goes on under its name; the
    adoption is on the action record with both identities; without the flag the new identity stays refused."""
    from reconcilers.management.commands.runcontroller import Command
    from reconcilers.models import ActionRecord

    cluster_register("eu-1", identity="uid-a")
    assert cluster_adopt("eu-1", identity="uid-a") is None  # the same cluster: nothing to adopt
    assert cluster_adopt("never", identity="uid-n") is None and not Cluster.objects.filter(name="never").exists()
    Command()._adopt("eu-1", "uid-b", "https://eu-1:6443")
    assert cluster_register("eu-1", identity="uid-b").identity == "uid-b"
    record = ActionRecord.objects.get(action="cluster.adopt")
    assert (record.target, record.cluster, record.status_code) == ("cluster:eu-1", "eu-1", 200)
    assert record.detail["before"] == "uid-a" and record.detail["identity"] == "uid-b"
    with pytest.raises(ClusterRefused):
        cluster_register("eu-1", identity="uid-a")
    Cluster.objects.filter(name="eu-1").update(removed_at=timezone.now())
    assert cluster_adopt("eu-1", identity="uid-c") is None  # a removed cluster stays as it was
    assert Cluster.objects.get(name="eu-1").identity == "uid-b"


def test_a_removed_cluster_and_a_bad_name_are_refused():
    cluster_register("old", identity="uid-o")
    Cluster.objects.filter(name="old").update(removed_at=timezone.now())
    with pytest.raises(ClusterRefused, match="removed"):
        cluster_register("old", identity="uid-o")
    with pytest.raises(ValueError, match="DNS label"):
        cluster_register("Bad/Name", identity="uid-x")
    assert not Cluster.objects.filter(name="Bad/Name").exists()


def test_the_identity_is_the_kube_system_namespace_uid(kapi: Any):
    from reconcilers.engine import kube
    from reconcilers.engine.clusters import NAMESPACES

    uid = cluster_identity(kapi)
    assert uid and uid == kube.get_object(kapi, NAMESPACES, None, "kube-system")["metadata"]["uid"]


# -- keys, mirror rows and sweeps of one cluster -----------------------------------------------------------------

def test_keys_carry_the_cluster_outside_the_default_one():
    obj = api_object("u1", "web")
    assert object_key(KIND, obj) == f"{KIND.group}/{KIND.version}/{KIND.plural}/shop/web"
    assert object_key(KIND, obj, "b") == "b/" + object_key(KIND, obj)
    assert InformerEvent(ADDED, KIND, obj, None, "b").key == "b/" + object_key(KIND, obj)
    child = {"metadata": {"name": "web", "namespace": "shop", "uid": "c1", "ownerReferences": [
        {"apiVersion": KIND.api_version, "kind": KIND.kind, "name": "web", "uid": "u1", "controller": True}]}}
    assert owner_keys(InformerEvent(ADDED, DEPLOYMENTS, child, None, "b"), [KIND], lambda kind, uid: None) == {
        "b/" + object_key(KIND, obj)}


def test_the_mirror_files_rows_under_their_cluster_and_the_same_name_twice_is_two_rows():
    resource_mirror_write([(KIND, api_object("ua", "web"))])
    resource_mirror_write([(KIND, api_object("ub", "web"))], cluster="b")
    a, b = Resource.objects.get(uid="ua"), Resource.objects.get(uid="ub")
    assert (a.cluster, b.cluster) == (DEFAULT_CLUSTER, "b")
    assert b.key == f"b/{a.key}" and a.key == KIND.request("shop", "web").key()
    resource_mirror_write([(KIND, api_object("ub", "web", rv="6"))], cluster="b")  # a refresh keeps both
    b.refresh_from_db()
    assert (b.cluster, b.key, b.resource_version) == ("b", f"b/{a.key}", "6")


def test_a_sweep_records_deleted_only_the_rows_of_its_own_cluster():
    resource_mirror_write([(KIND, api_object("da", "one")), (KIND, api_object("da2", "two"))])
    resource_mirror_write([(KIND, api_object("db", "one"))], cluster="b")
    later = datetime.now(UTC) + timedelta(seconds=5)
    # cluster b's list has nothing: only b's row is gone; the default cluster's rows are not b's to judge
    assert resource_mirror_sweep(Plain(), set(), listed_at=later, cluster="b") == ["db"]
    assert set(Resource.objects.filter(deleted=True).values_list("uid", flat=True)) == {"db"}
    # the default cluster's list has da only: da2 is gone, b's row (already gone) and b are untouched
    assert resource_mirror_sweep(Plain(), {"da"}, listed_at=later) == ["da2"]
    assert set(Resource.objects.filter(deleted=True).values_list("uid", flat=True)) == {"db", "da2"}


def test_the_child_cache_of_a_run_reads_its_own_clusters_entries():
    asked: list[str] = []

    class Queue:
        def cached_child(self, key: str) -> str:
            asked.append(key)
            return ""


    objectcache.ChildCache(Queue(), "b").get("apps/v1/deployments/shop/web")
    objectcache.ChildCache(Queue()).get("apps/v1/deployments/shop/web")
    assert asked == ["b/apps/v1/deployments/shop/web", "apps/v1/deployments/shop/web"]


# -- the workers' client of a cluster ----------------------------------------------------------------------------

def test_a_worker_reaches_a_registered_cluster_through_its_context_and_refuses_the_others(tmp_path, settings):

    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    for path, server in ((first, "http://127.0.0.1:1"), (second, "http://127.0.0.1:2")):
        path.write_text("apiVersion: v1\nkind: Config\n"
                        f"clusters: [{{name: kubesim, cluster: {{server: '{server}'}}}}]\n"
                        "users: [{name: kubesim, user: {}}]\n"
                        "contexts: [{name: kubesim, context: {cluster: kubesim, user: kubesim}}]\n"
                        "current-context: kubesim\n")
    kubeconfig_with_context(second, "b", tmp_path / "b.yaml")
    settings.KUBECONFIG = f"{first}:{tmp_path / 'b.yaml'}"
    apiclient.reset()
    try:
        assert apiclient.get_api_client().configuration.host == "http://127.0.0.1:1"
        with pytest.raises(apiclient.UnknownCluster, match="not registered"):
            apiclient.get_api_client("b")
        cluster_register("b", identity="uid-b", context="b")
        assert apiclient.get_api_client("b").configuration.host == "http://127.0.0.1:2"
        cluster_register("c", identity="uid-c", context="nowhere")
        with pytest.raises(apiclient.UnknownCluster, match="nowhere"):
            apiclient.get_api_client("c")
        Cluster.objects.filter(name="b").update(removed_at=timezone.now())
        apiclient.reset()
        with pytest.raises(apiclient.UnknownCluster, match="removed"):
            apiclient.get_api_client("b")
    finally:
        apiclient.reset()


# -- health ------------------------------------------------------------------------------------------------------

class FakeConfiguration:
    host = "http://cluster-h:6443"


class FakeApi:
    configuration = FakeConfiguration()


def test_the_leader_reports_health_and_an_unreachable_api_since_when_until_it_answers_again():
    cluster_register("h", identity="uid-h")
    state = {"leading": True, "reachable": True}
    listed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def probe() -> None:
        if not state["reachable"]:
            raise ConnectionError("refused")

    written = {"metadata": {"creationTimestamp": "2026-01-02T03:04:00Z",
                            "managedFields": [{"time": "2026-01-02T03:04:03Z"}, {"time": "2026-01-02T03:04:01Z"}]}}
    leader = HealthReporter(FakeApi(), "h", identity="ctl-1", leading=lambda: state["leading"],
                            listed_at=lambda: [None, listed], interval=1, probe=probe,
                            last_events=lambda: [None, (listed.timestamp() + 2.5, written)])
    t0 = timezone.now()
    assert leader.report(t0)
    row = Cluster.objects.get(name="h")
    assert (row.leader, row.heartbeat_at, row.last_list_at, row.unreachable_since) == ("ctl-1", t0, listed, None)
    assert row.watch_lag_seconds == 4.5  # arrived 03:04:07.5, last written 03:04:03

    state["reachable"] = False
    standby = HealthReporter(FakeApi(), "h", identity="ctl-2", leading=lambda: False, listed_at=lambda: [],
                             interval=1, probe=probe)
    assert not standby.report(t0 + timedelta(seconds=1))  # not the leader on record: says nothing
    assert leader.report(t0 + timedelta(seconds=2))
    assert not leader.report(t0 + timedelta(seconds=3))  # since when: the first time only
    row.refresh_from_db()
    assert (row.unreachable_since, row.heartbeat_at) == (t0 + timedelta(seconds=2), t0)

    state["reachable"] = True
    assert leader.report(t0 + timedelta(seconds=4))
    row.refresh_from_db()
    assert (row.unreachable_since, row.heartbeat_at) == (None, t0 + timedelta(seconds=4))
    state["leading"] = False
    assert not leader.report(t0 + timedelta(seconds=5))  # a replica that no longer leads reports nothing


def test_the_role_lets_the_controller_read_the_identity_and_no_more_than_it_needs():
    from reconcilers.engine.rbac import cluster_role_rules
    from reconcilers.kinds.memcached import MemcachedReconciler
    from reconcilers.kinds.tenant import TenantReconciler

    def namespace_rules(reconcilers: list[Reconciler]) -> list[dict[str, Any]]:
        return [r for r in cluster_role_rules(reconcilers) if "namespaces" in r["resources"]]

    assert namespace_rules([MemcachedReconciler()]) == [
        {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["kube-system"], "verbs": ["get"]}]
    # a kind that gets every namespace already covers it: no named grant besides
    assert all("resourceNames" not in r for r in namespace_rules([MemcachedReconciler(), TenantReconciler()]))


# -- a worker's run of another cluster's key ---------------------------------------------------------------------

def test_a_run_reaches_its_keys_cluster_and_a_key_of_an_unknown_cluster_fails_touching_nothing(
        make, kapi, workqueue, kubesim, settings, tmp_path):
    from reconcilers.engine import kube, runner
    from reconcilers.models import ReconcileRun
    from tests.reconcilers.testkinds import GADGET

    key, obj = make(mode="ok")
    unknown = f"nowhere/{key}"
    assert workqueue.add(unknown)
    assert runner.run(unknown) == "error"
    (run,) = ReconcileRun.objects.filter(key=unknown)
    assert run.error_class == "UnknownCluster" and "not registered" in run.error_message
    assert "status" not in kube.get_object(kapi, GADGET, obj["metadata"]["namespace"], "g")  # not this cluster's
    assert not Resource.objects.filter(key=unknown).exists() and not Resource.objects.filter(cluster="nowhere").exists()
    snapshot = workqueue.snapshot()
    assert unknown not in {d.key for d in snapshot.backing_off} and snapshot.depth == 0  # forgotten, not retried

    # cluster b: registered with a context that (here) reaches the same kubesim: its key's run goes through it
    kubeconfig_with_context(kubesim.kubeconfig, "b", tmp_path / "b.yaml")
    settings.KUBECONFIG = f"{kubesim.kubeconfig}:{tmp_path / 'b.yaml'}"
    apiclient.reset()
    cluster_register("b", identity="uid-b", context="b")
    assert workqueue.add(f"b/{key}")
    assert runner.run(f"b/{key}") == "success"
    row = Resource.objects.get(uid=obj["metadata"]["uid"])
    assert (row.cluster, row.key, row.phase) == ("b", f"b/{key}", "Running")
    apiclient.reset()
