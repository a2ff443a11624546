"""Deletion: finalizers, propagation policies, garbage collection, namespace and CRD deletion."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from kubesim.testing import wait_for
from tests.kubesim.conftest import widget

W = ("example.com", "v1")


def _exists(fn, *args):
    try:
        fn(*args)
        return True
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise


def test_finalizers_hold_an_object_until_the_last_one_is_removed(custom, widgets, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", {**widget("f"), "metadata": {
        "name": "f", "finalizers": ["example.com/a", "example.com/b"]}})
    out = custom.delete_namespaced_custom_object(*W, ns, "widgets", "f")
    assert out["metadata"]["deletionTimestamp"] and out["metadata"]["deletionGracePeriodSeconds"] == 0
    assert out["metadata"]["generation"] == 2  # setting deletionTimestamp bumps generation
    custom.patch_namespaced_custom_object(*W, ns, "widgets", "f", {"metadata": {"finalizers": ["example.com/b"]}})
    assert custom.get_namespaced_custom_object(*W, ns, "widgets", "f")["metadata"]["finalizers"] == ["example.com/b"]
    with pytest.raises(client.ApiException) as e:
        custom.patch_namespaced_custom_object(*W, ns, "widgets", "f", {"metadata": {
            "finalizers": ["example.com/b", "example.com/new"]}})
    assert e.value.status == 422
    assert "no new finalizers" in json.loads(e.value.body)["details"]["causes"][0]["message"]
    custom.patch_namespaced_custom_object(*W, ns, "widgets", "f", {"metadata": {"finalizers": None}})
    assert not _exists(custom.get_namespaced_custom_object, *W, ns, "widgets", "f")


def test_delete_preconditions(core, ns):
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "pre"}})
    with pytest.raises(client.ApiException) as e:
        core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="not-the-uid")))
    assert e.value.status == 409
    core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=cm.metadata.uid)))
    assert not _exists(core.read_namespaced_config_map, "pre", ns)


def _owned(core, ns, name, owner, block=True):
    return core.create_namespaced_config_map(ns, {"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
        "blockOwnerDeletion": block}]}})


def test_background_deletion_collects_dependents(core, ns):
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    _owned(core, ns, "dep1", owner)
    _owned(core, ns, "dep2", owner)
    core.delete_namespaced_config_map("owner", ns)
    assert not _exists(core.read_namespaced_config_map, "owner", ns)  # the owner goes at once
    wait_for(lambda: not core.list_namespaced_config_map(ns).items, timeout=5)


def test_foreground_deletion_waits_for_blocking_dependents(core, ns):
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    dep = _owned(core, ns, "dep", owner)
    core.patch_namespaced_config_map("dep", ns, {"metadata": {"finalizers": ["example.com/hold"]}})
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")
    o = core.read_namespaced_config_map("owner", ns)
    assert "foregroundDeletion" in o.metadata.finalizers and o.metadata.deletion_timestamp
    wait_for(lambda: core.read_namespaced_config_map("dep", ns).metadata.deletion_timestamp, timeout=5)
    assert _exists(core.read_namespaced_config_map, "owner", ns)  # blocked by the dependent
    core.patch_namespaced_config_map("dep", ns, {"metadata": {"finalizers": None}})
    wait_for(lambda: not _exists(core.read_namespaced_config_map, "owner", ns), timeout=5)
    assert dep.metadata.uid


def test_orphan_deletion_keeps_dependents_and_strips_their_owner_reference(core, ns):
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    _owned(core, ns, "dep", owner)
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
    wait_for(lambda: not _exists(core.read_namespaced_config_map, "owner", ns), timeout=5)
    assert core.read_namespaced_config_map("dep", ns).metadata.owner_references is None


def test_dependent_with_a_remaining_owner_survives(core, ns):
    a = core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    b = core.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dep", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": a.metadata.uid},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": b.metadata.uid}]}})
    core.delete_namespaced_config_map("a", ns)
    wait_for(lambda: len(core.read_namespaced_config_map("dep", ns).metadata.owner_references) == 1, timeout=5)
    core.delete_namespaced_config_map("b", ns)
    wait_for(lambda: not _exists(core.read_namespaced_config_map, "dep", ns), timeout=5)


def test_deleting_a_namespace_deletes_its_content(core, custom, widgets, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    custom.create_namespaced_custom_object(*W, ns, "widgets", {**widget("held"), "metadata": {
        "name": "held", "finalizers": ["example.com/x"]}})
    core.delete_namespace(ns)
    assert core.read_namespace(ns).status.phase == "Terminating"
    wait_for(lambda: not _exists(core.read_namespaced_config_map, "c", ns), timeout=5)
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "late"}})
    assert e.value.status == 403
    assert json.loads(e.value.body)["message"] == (f'configmaps "late" is forbidden: unable to create new content '
                                                   f"in namespace {ns} because it is being terminated")
    wait_for(lambda: any(c.type == "NamespaceFinalizersRemaining" and c.status == "True"
                         for c in core.read_namespace(ns).status.conditions or []), timeout=5)
    custom.patch_namespaced_custom_object(*W, ns, "widgets", "held", {"metadata": {"finalizers": None}})
    wait_for(lambda: not _exists(core.read_namespace, ns), timeout=5)


def test_deleting_a_crd_removes_its_objects_and_stops_serving_it(api_client, custom):
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition({
        "metadata": {"name": "tmps.example.io"},
        "spec": {"group": "example.io", "scope": "Namespaced", "names": {"plural": "tmps", "kind": "Tmp"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    custom.create_namespaced_custom_object("example.io", "v1", "default", "tmps", {
        "apiVersion": "example.io/v1", "kind": "Tmp", "metadata": {"name": "t1"}})
    ext.delete_custom_resource_definition("tmps.example.io")
    wait_for(lambda: not _exists(ext.read_custom_resource_definition, "tmps.example.io"), timeout=5)
    with pytest.raises(client.ApiException) as e:
        custom.list_namespaced_custom_object("example.io", "v1", "default", "tmps")
    assert e.value.status == 404
    assert "example.io" not in {g.name for g in client.ApisApi(api_client).get_api_versions().groups}


def test_delete_collection_with_a_label_selector(core, ns):
    for i in range(4):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}", "labels": {"odd": str(i % 2)}}})
    core.delete_collection_namespaced_config_map(ns, label_selector="odd=1")
    assert sorted(c.metadata.name for c in core.list_namespaced_config_map(ns).items) == ["c0", "c2"]


def test_watches_on_a_removed_crd_end(api_client, custom):
    import threading

    from kubernetes import watch

    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition({
        "metadata": {"name": "brief.example.io"},
        "spec": {"group": "example.io", "scope": "Namespaced", "names": {"plural": "brief", "kind": "Brief"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    ended = threading.Event()

    def consume():
        for _ in watch.Watch().stream(custom.list_namespaced_custom_object, "example.io", "v1", "default", "brief",
                                      timeout_seconds=30):
            pass
        ended.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.3)
    ext.delete_custom_resource_definition("brief.example.io")
    assert ended.wait(5)
