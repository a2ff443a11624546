"""The health tree selector: kstatus-like health of Deployments, ReplicaSets and Pods (ImagePullBackOff,
CrashLoopBackOff, Ready), and the reader against a fake API that counts its LISTs (one per kind, cached)."""

from __future__ import annotations

import pytest

from reconcilers.engine import kube
from reconcilers.services.selectors import generic_objects
from reconcilers.services.selectors import health_tree as ht
from reconcilers.services.selectors import object_health as oh
from tests.opsconsole.api import factories as f


def deployment(desired=3, ready=3, updated=None, available=None, generation=2, observed=2, conditions=()):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"generation": generation},
            "spec": {"replicas": desired},
            "status": {"observedGeneration": observed, "replicas": desired, "readyReplicas": ready,
                       "updatedReplicas": desired if updated is None else updated,
                       "availableReplicas": ready if available is None else available,
                       "conditions": list(conditions)}}


def pod(phase="Running", ready=True, waiting=""):
    state = {"waiting": {"reason": waiting, "message": f"{waiting} for memcached:broken"}} if waiting else \
        {"running": {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {},
            "spec": {"containers": [{"name": "memcached"}]},
            "status": {"phase": phase, "containerStatuses": [{"name": "memcached", "ready": ready, "state": state}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_deployment_with_all_replicas_available_is_current_with_its_ready_count():
    h = oh.object_health(deployment(desired=3, ready=3))
    assert (h.status, h.ready) == (oh.CURRENT, "3/3 ready")


def test_a_deployment_rolling_out_is_in_progress_judged_by_the_kinds_rollout_rules():
    assert oh.object_health(deployment(desired=3, ready=2)).status == oh.IN_PROGRESS
    # the broken-image case: 3 old replicas ready, 1 new one not: no replica of the current spec is ready
    broken = deployment(desired=3, ready=3, updated=1)
    broken["status"]["replicas"] = 4
    h = oh.object_health(broken)
    assert (h.status, h.reason, h.ready) == (oh.IN_PROGRESS, "ReplicasNotUpdated", "0/3 ready")
    assert h.message == "1 out of 3 new replicas have been updated"
    behind = oh.object_health(deployment(generation=3, observed=2))
    assert behind.status == oh.IN_PROGRESS and "spec update to be observed" in behind.message


def test_a_deployment_past_its_progress_deadline_is_failed():
    cond = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "too slow"}
    h = oh.object_health(deployment(desired=2, ready=1, conditions=[cond]))
    assert (h.status, h.reason, h.ready) == (oh.FAILED, "ProgressDeadlineExceeded", "1/2 ready")


def test_a_statefulset_is_judged_by_its_own_rules_partition_included():
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"generation": 1},
           "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}},
           "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 1}}
    h = oh.object_health(sts)
    assert (h.status, h.reason) == (oh.IN_PROGRESS, "PartitionNotUpdated")
    sts["status"]["updatedReplicas"] = 2
    assert oh.object_health(sts).status == oh.CURRENT


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff"])
def test_a_pod_whose_container_waits_on_a_lasting_error_is_failed_with_the_reason(reason):
    h = oh.object_health(pod(phase="Pending", ready=False, waiting=reason))
    assert (h.status, h.reason, h.ready) == (oh.FAILED, reason, "0/1 ready")


def test_a_running_ready_pod_is_current_and_a_starting_one_in_progress():
    assert oh.object_health(pod()).status == oh.CURRENT
    starting = oh.object_health(pod(phase="Pending", ready=False, waiting="ContainerCreating"))
    assert (starting.status, starting.reason) == (oh.IN_PROGRESS, "ContainerCreating")
    assert oh.object_health(pod(phase="Running", ready=False)).status == oh.IN_PROGRESS


def test_a_replicaset_with_a_replica_failure_is_failed():
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"replicas": 1}, "status": {"conditions": [
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota"}]}}
    assert oh.object_health(rs).status == oh.FAILED


class FakeApi:
    """kube.list_objects replaced: answers from `objects` by plural and counts the calls per plural."""

    def __init__(self, objects: dict[str, list[dict]]):
        self.objects, self.calls = objects, []

    def __call__(self, api, kind, namespace=None, **kwargs):
        self.calls.append((kind.plural, namespace))
        items = [{**o, "apiVersion": kind.api_version, "kind": kind.kind} for o in self.objects.get(kind.plural, [])]
        return kube.ListResult(items, "1")


def _meta(name, uid, owner="", namespace="ns"):
    meta = {"name": name, "uid": uid, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True, "kind": "X", "name": "x", "apiVersion": "v1"}]
    return meta


@pytest.fixture
def fake(monkeypatch, builtin_kinds_only):
    ht.cache_clear()
    yield lambda objects: monkeypatch.setattr(kube, "list_objects", FakeApi(objects)) or kube.list_objects
    ht.cache_clear()


@pytest.mark.django_db
def test_the_tree_lists_each_kind_once_follows_owners_by_uid_and_is_cached(fake):
    res = f.resource("mc", "ns", uid="mc-uid")
    api = fake({
        "deployments": [{"metadata": _meta("mc", "d1", "mc-uid"), **{k: v for k, v in deployment(1, 0).items()
                                                                      if k in ("spec", "status")}},
                        {"metadata": _meta("other", "d2", "someone-else")}],
        "services": [{"metadata": _meta("mc", "s1", "mc-uid")}],
        "replicasets": [{"metadata": _meta("mc-abc", "rs1", "d1"), "spec": {"replicas": 1}, "status": {}},
                        {"metadata": _meta("stray", "rs2", "d2")}],
        "pods": [{"metadata": _meta("mc-abc-x", "p1", "rs1"), **{k: v for k, v in pod(
            "Pending", False, "ImagePullBackOff").items() if k in ("spec", "status")}}],
    })
    tree = ht.resource_tree(res, api=object())
    assert sorted(api.calls) == [("deployments", "ns"), ("pods", "ns"), ("replicasets", "ns"), ("services", "ns")]
    rows = [(n.depth, n.kind, n.name, n.health.status) for n in tree.rows()]
    assert rows == [(0, "Memcached", "mc", oh.CURRENT), (1, "Deployment", "mc", oh.IN_PROGRESS),
                    (2, "ReplicaSet", "mc-abc", oh.IN_PROGRESS), (3, "Pod", "mc-abc-x", oh.FAILED),
                    (1, "Service", "mc", oh.CURRENT)]
    assert tree.rows()[3].health.reason == "ImagePullBackOff" and tree.error == ""
    assert tree.counts() == {oh.CURRENT: 1, oh.IN_PROGRESS: 2, oh.FAILED: 1}
    ht.resource_tree(res, api=object())
    assert len(api.calls) == 4  # the second read within CACHE_SECONDS lists nothing


@pytest.mark.django_db
def test_an_unreachable_api_gives_the_resource_and_a_message(monkeypatch, builtin_kinds_only):
    ht.cache_clear()

    def refuse(*args, **kwargs):
        raise kube.ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(kube, "list_objects", refuse)
    tree = ht.resource_tree(f.resource("mc", "ns"), api=object())
    assert [n.kind for n in tree.rows()] == ["Memcached"] and "did not answer" in tree.error and "403" in tree.error


def test_only_owned_kinds_their_descendants_and_events_are_viewable(builtin_kinds_only):
    assert generic_objects.viewable_kind("apps", "v1", "deployments") is not None
    assert generic_objects.viewable_kind("core", "v1", "pods") is not None
    assert generic_objects.viewable_kind("core", "v1", "events") is not None
    assert generic_objects.viewable_kind("core", "v1", "secrets") is None
    assert generic_objects.viewable_kind("apps", "v2", "deployments") is None  # the version must match too


@pytest.mark.django_db
def test_a_cluster_scoped_resources_tree_hides_objects_outside_the_viewers_namespaces(fake):
    tenant = f.resource("acme", kind=f.TENANT, uid="t-uid")
    api = fake({"namespaces": [{"metadata": _meta("acme", "n1", "t-uid", namespace="")}],
                "resourcequotas": [{"metadata": _meta("quota", "q1", "t-uid", namespace="acme")}],
                "rolebindings": [{"metadata": _meta("admins", "b1", "t-uid", namespace="acme")}]})
    everything = [(n.kind, n.name) for n in ht.resource_tree(tenant, api=object()).rows()]
    assert everything == [("Tenant", "acme"), ("Namespace", "acme"), ("ResourceQuota", "quota"),
                          ("RoleBinding", "admins")]
    limited = ht.resource_tree(tenant, namespaces=frozenset({""}), api=object())
    assert [(n.kind, n.name) for n in limited.rows()] == [("Tenant", "acme"), ("Namespace", "acme")]
    assert ("resourcequotas", None) in api.calls  # a cluster-scoped owner: its namespaced children in any namespace
