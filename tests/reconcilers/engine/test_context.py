"""EngineContext against a real kubesim: children server-side applied with ownerReferences (one PATCH each,
no needless writes, changes by others put back), finalizers with the resourceVersion, Events about the
object."""

from __future__ import annotations

import time

import pytest

from reconcilers.core.types import TemporaryError
from reconcilers.engine import kube
from reconcilers.engine.context import EngineContext
from reconcilers.kinds.memcached import DEPLOYMENT, SERVICE, MemcachedReconciler
from tests.reconcilers.testkinds import GADGET, GadgetReconciler, gadget

pytestmark = pytest.mark.integration


def configmap(namespace, name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


@pytest.fixture
def ctx(kapi, namespace):
    obj = kube.create_object(kapi, GADGET, gadget(namespace, "g1"))
    return EngineContext(GadgetReconciler(), obj, kapi)


def test_apply_child_creates_the_child_with_a_controller_owner_reference(ctx, namespace):
    child = ctx.apply_child(configmap("", "c1", a="1"))  # the owner's namespace by default
    assert ctx.field_manager == "opsconsole-gadget"
    assert [(m["manager"], m["operation"]) for m in child["metadata"]["managedFields"]] == [
        ("opsconsole-gadget", "Apply")]
    assert child["metadata"]["namespace"] == namespace
    (ref,) = child["metadata"]["ownerReferences"]
    assert ref == {"apiVersion": "test.opsconsole.io/v1", "kind": "Gadget", "name": "g1",
                   "uid": ctx.obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    assert [c["metadata"]["name"] for c in ctx.list_children(kube.kind_for(ctx.api_client, "v1", "ConfigMap"))] == [
        "c1"]


def test_apply_child_patches_only_what_differs(ctx):
    first = ctx.apply_child(configmap("", "c1", a="1"))
    same = ctx.apply_child(configmap("", "c1", a="1"))
    assert same["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    changed = ctx.apply_child(configmap("", "c1", a="2"))
    assert changed["data"] == {"a": "2"}
    assert changed["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert len(ctx.children) == 3 and ctx.children[-1] == changed
    assert [c["metadata"]["resourceVersion"] for c in ctx.children] == [
        first["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        changed["metadata"]["resourceVersion"]]


def _requests(method: str) -> float:
    from prometheus_client import REGISTRY

    return sum(s.value for m in REGISTRY.collect() if m.name == "rest_client_requests"
               for s in m.samples if s.name.endswith("_total") and s.labels.get("method") == method)


def _counts() -> tuple[float, float, float]:
    return _requests("GET"), _requests("POST"), _requests("PATCH")


def _deltas(before: tuple[float, float, float]) -> tuple[float, float, float]:
    """(GET, POST, PATCH) requests since `before`."""
    gets, posts, patches = _counts()
    return gets - before[0], posts - before[1], patches - before[2]


def test_apply_child_is_one_patch_and_never_looks_first_whether_new_existing_or_reconciled(ctx, kapi, namespace):
    """Server-side apply: one PATCH per child, no GET or POST, whether the child is new or not and whether the
    object was reconciled before (the create-or-patch this replaced created first for a never-reconciled
    object and looked first, a GET, for a reconciled one: that branch is gone)."""
    ctx.resolve("v1", "ConfigMap")  # discovery, cached from here on
    before = _counts()
    ctx.apply_child(configmap("", "c1", a="1"))  # a new child of a never-reconciled object
    assert _deltas(before) == (0, 0, 1)
    before = _counts()
    ctx.apply_child(configmap("", "c1", a="2"))  # an existing child
    assert _deltas(before) == (0, 0, 1)

    # an object reconciled before (the old create-or-patch looked its children up first): the same one PATCH
    reconciled = kube.create_object(kapi, GADGET, gadget(namespace, "g9"))
    reconciled["status"] = {"observedGeneration": 1}
    other = EngineContext(GadgetReconciler(), reconciled, kapi)
    for data in ("1", "1", "2"):  # new, unchanged, changed
        before = _counts()
        other.apply_child(configmap("", "c9", a=data))
        assert _deltas(before) == (0, 0, 1)


def test_apply_child_adopts_an_unowned_child_and_refuses_one_that_another_controller_owns(ctx, kapi, namespace):
    cm = kube.kind_for(kapi, "v1", "ConfigMap")
    kube.create_object(kapi, cm, configmap(namespace, "loose", a="1"))
    adopted = ctx.apply_child(configmap("", "loose", a="1"))
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == ctx.obj["metadata"]["uid"]

    other = kube.create_object(kapi, GADGET, gadget(namespace, "g2"))
    EngineContext(GadgetReconciler(), other, kapi).apply_child(configmap("", "theirs", a="1"))
    with pytest.raises(TemporaryError) as info:
        ctx.apply_child(configmap("", "theirs", a="1"))
    assert info.value.reason == "ChildOwnedElsewhere"
    # refused by the API (at most one controller reference): the child is as its controller left it
    theirs = kube.get_object(kapi, cm, namespace, "theirs")
    assert [r["uid"] for r in theirs["metadata"]["ownerReferences"]] == [other["metadata"]["uid"]]


def test_memcached_children_apply_cleanly_against_the_api(kapi, namespace):
    obj = kube.create_object(kapi, MemcachedReconciler.resource, {
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": namespace}, "spec": {"size": 2}})
    assert obj["spec"]["image"] and obj["spec"]["port"] == 11211  # CRD defaults
    ctx = EngineContext(MemcachedReconciler(), obj, kapi)
    from reconcilers.core.kind import validate_spec
    from reconcilers.kinds.memcached import MemcachedSpec, deployment_manifest, service_manifest

    spec = validate_spec(MemcachedSpec, obj)
    dep = ctx.apply_child(deployment_manifest(obj, spec))
    svc = ctx.apply_child(service_manifest(obj, spec))
    # the deployment controller writes the Deployment's status meanwhile: compare once it is done with it
    dep = _settled(kapi, DEPLOYMENT, namespace, "mc")
    # the server defaults fields (imagePullPolicy, clusterIP, ...): applying again changes nothing
    dep_again = ctx.apply_child(deployment_manifest(obj, spec))
    svc_again = ctx.apply_child(service_manifest(obj, spec))
    assert dep_again["metadata"]["resourceVersion"] == dep["metadata"]["resourceVersion"]
    assert svc_again["metadata"]["resourceVersion"] == svc["metadata"]["resourceVersion"]
    assert dep_again["metadata"]["uid"] == dep["metadata"]["uid"]
    assert svc_again["metadata"]["uid"] == svc["metadata"]["uid"]
    assert kube.get_object(kapi, SERVICE, namespace, "mc")["metadata"]["resourceVersion"] == svc["metadata"][
        "resourceVersion"]
    assert len(ctx.children) == 4


def _settled(kapi, kind, namespace: str, name: str, timeout: float = 20.0) -> dict:
    """The object once its controller has stopped writing it: all replicas available and the same
    resourceVersion for half a second."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        obj = kube.get_object(kapi, kind, namespace, name)
        status = obj.get("status") or {}
        done = (status.get("observedGeneration") == obj["metadata"]["generation"]
                and status.get("availableReplicas") == obj["spec"]["replicas"])
        if last is None or obj["metadata"]["resourceVersion"] != last["metadata"]["resourceVersion"]:
            last, since = obj, time.monotonic()
        elif done and time.monotonic() - since >= 0.5:
            return obj
        time.sleep(0.05)
    raise AssertionError(f"{kind.kind} {namespace}/{name} did not settle: {last}")


def test_a_child_changed_by_someone_else_is_put_back_and_fields_no_longer_applied_are_removed(ctx, kapi, namespace):
    cm = kube.kind_for(kapi, "v1", "ConfigMap")
    applied = ctx.apply_child(configmap("", "c1", a="1", b="2"))
    # an out-of-band edit (as kubectl edit would): one applied field changed, one field of its own added
    tampered = kube.patch_object(kapi, cm, namespace, "c1", {"data": {"a": "tampered", "mine": "x"}})
    assert tampered["data"] == {"a": "tampered", "b": "2", "mine": "x"}
    back = ctx.apply_child(configmap("", "c1", a="1", b="2"))
    assert back["data"] == {"a": "1", "b": "2", "mine": "x"}  # a: the engine's again; mine: nobody applies it
    assert back["metadata"]["resourceVersion"] not in (applied["metadata"]["resourceVersion"],
                                                       tampered["metadata"]["resourceVersion"])
    # the engine stops applying b: the API server removes it (the engine's manager set it, nobody else does)
    released = ctx.apply_child(configmap("", "c1", a="1"))
    assert released["data"] == {"a": "1", "mine": "x"}
    assert kube.get_object(kapi, cm, namespace, "c1")["data"] == {"a": "1", "mine": "x"}

    # the same for a Deployment: a changed replica count and image are put back
    dep_manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "d1"}},
        "template": {"metadata": {"labels": {"app": "d1"}},
                     "spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}
    ctx.apply_child(dep_manifest)
    kube.patch_object(kapi, DEPLOYMENT, namespace, "d1", {"spec": {"replicas": 5, "template": {"spec": {
        "containers": [{"name": "c", "image": "img:tampered"}]}}}})
    dep = ctx.apply_child(dep_manifest)
    assert dep["spec"]["replicas"] == 1
    assert [c["image"] for c in dep["spec"]["template"]["spec"]["containers"]] == ["img:1"]


def test_finalizers_are_added_and_removed_with_the_resource_version_and_survive_a_conflict(ctx, kapi, namespace):
    stale_rv = ctx.obj["metadata"]["resourceVersion"]
    kube.patch_object(kapi, GADGET, namespace, "g1", {"metadata": {"labels": {"changed": "yes"}}})
    ctx.add_finalizer("a/b")  # its read is stale now: 409, re-read, retry
    live = kube.get_object(kapi, GADGET, namespace, "g1")
    assert live["metadata"]["finalizers"] == ["a/b"]
    assert live["metadata"]["labels"] == {"changed": "yes"}  # the concurrent change was not overwritten
    assert ctx.obj["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"] != stale_rv
    ctx.add_finalizer("a/b")
    assert kube.get_object(kapi, GADGET, namespace, "g1")["metadata"]["resourceVersion"] == live["metadata"][
        "resourceVersion"]
    ctx.remove_finalizer("a/b")
    assert not kube.get_object(kapi, GADGET, namespace, "g1")["metadata"].get("finalizers")


def test_removing_the_last_finalizer_of_an_object_being_deleted_lets_it_go(ctx, kapi, namespace):
    ctx.add_finalizer("a/b")
    kube.delete_object(kapi, GADGET, namespace, "g1")
    ctx.refresh()
    assert ctx.obj["metadata"].get("deletionTimestamp")
    ctx.remove_finalizer("a/b")
    assert kube.get_object(kapi, GADGET, namespace, "g1") is None


def test_an_event_is_posted_about_the_object(ctx, kapi, namespace):
    ctx.event("Normal", "Tested", "it works")
    events = kube.list_objects(kapi, kube.kind_for(kapi, "v1", "Event"), namespace).items
    (event,) = [e for e in events if e["reason"] == "Tested"]
    assert event["type"] == "Normal" and event["message"] == "it works"
    assert event["involvedObject"]["uid"] == ctx.obj["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "Gadget" and event["involvedObject"]["name"] == "g1"
    assert event["source"]["component"] == "opsconsole-controller"
    with pytest.raises(ValueError):
        ctx.event("Info", "Nope", "")

