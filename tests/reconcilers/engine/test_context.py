"""EngineContext against a real kubesim: children with ownerReferences, no needless writes, finalizers with
the resourceVersion, Events about the object."""

from __future__ import annotations

import pytest

from reconcilers.core.types import TemporaryError
from reconcilers.engine import kube
from reconcilers.engine.context import EngineContext, is_subset
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
    assert ctx.children_written == 2


def _requests(method: str) -> float:
    from prometheus_client import REGISTRY

    return sum(s.value for m in REGISTRY.collect() if m.name == "rest_client_requests"
               for s in m.samples if s.name.endswith("_total") and s.labels.get("method") == method)


def test_apply_child_of_a_never_reconciled_object_creates_without_looking_first(ctx, kapi, namespace):
    ctx.resolve("v1", "ConfigMap")  # discovery, cached from here on
    gets, posts = _requests("GET"), _requests("POST")
    ctx.apply_child(configmap("", "c1", a="1"))
    assert (_requests("GET") - gets, _requests("POST") - posts) == (0, 1)

    reconciled = kube.create_object(kapi, GADGET, gadget(namespace, "g9"))
    reconciled["status"] = {"observedGeneration": 1}
    gets = _requests("GET")
    EngineContext(GadgetReconciler(), reconciled, kapi).apply_child(configmap("", "c9", a="1"))
    assert _requests("GET") - gets == 1  # reconciled before: its children are looked up first


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


def test_memcached_children_apply_cleanly_against_the_api(kapi, namespace):
    obj = kube.create_object(kapi, MemcachedReconciler.resource, {
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": namespace}, "spec": {"size": 2}})
    assert obj["spec"]["image"] and obj["spec"]["port"] == 11211  # CRD defaults
    ctx = EngineContext(MemcachedReconciler(), obj, kapi)
    from reconcilers.kinds.memcached import deployment_manifest, memcached_spec, service_manifest

    spec = memcached_spec(obj)
    dep = ctx.apply_child(deployment_manifest(obj, spec))
    svc = ctx.apply_child(service_manifest(obj, spec))
    written = ctx.children_written
    # the server defaults fields (imagePullPolicy, clusterIP, ...): applying again changes nothing
    ctx.apply_child(deployment_manifest(obj, spec))
    ctx.apply_child(service_manifest(obj, spec))
    assert ctx.children_written == written == 2
    assert kube.get_object(kapi, DEPLOYMENT, namespace, "mc")["metadata"]["uid"] == dep["metadata"]["uid"]
    assert kube.get_object(kapi, SERVICE, namespace, "mc")["metadata"]["uid"] == svc["metadata"]["uid"]


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


def test_is_subset_compares_what_the_manifest_says_and_ignores_server_defaults():
    assert is_subset({"a": [{"b": 1}]}, {"a": [{"b": 1, "c": 2}], "d": 3})
    assert not is_subset({"a": [{"b": 1}]}, {"a": [{"b": 1}, {"b": 2}]})
    assert not is_subset({"a": 1}, {"a": True})
    assert not is_subset({"a": "1"}, {})
