"""The event filters and the owner mapping (pure functions, no server)."""

from __future__ import annotations

import copy

import pytest

from reconcilers.core.meta import FLUX_REQUESTED_AT, RECONCILE_REQUESTED_AT
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.controller.events import (
    InformerEvent,
    child_changed,
    owner_keys,
    primary_wants_reconcile,
)

MEMCACHED = ResourceKind("cache.example.com", "v1alpha1", "memcacheds", "Memcached")
TENANT = ResourceKind("tenancy.example.com", "v1alpha1", "tenants", "Tenant", namespaced=False)
DEPLOYMENT = ResourceKind("apps", "v1", "deployments", "Deployment")


def memcached(**meta):
    obj = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "m1", "namespace": "ns", "uid": "u-1", "generation": 1, "resourceVersion": "10"},
        "spec": {"size": 1},
        "status": {"phase": "Pending"},
    }
    obj["metadata"].update(meta)
    return obj


def modified(old, mutate):
    new = copy.deepcopy(old)
    mutate(new)
    new["metadata"]["resourceVersion"] = str(int(old["metadata"]["resourceVersion"]) + 1)
    return InformerEvent("MODIFIED", MEMCACHED, new, old)


def test_added_and_deleted_always_enqueue():
    assert primary_wants_reconcile(InformerEvent("ADDED", MEMCACHED, memcached()))
    assert primary_wants_reconcile(InformerEvent("DELETED", MEMCACHED, memcached(), memcached()))


def test_a_status_only_update_does_not_enqueue():
    def set_status(o):
        o["status"] = {"phase": "Running", "readyReplicas": 1}

    assert not primary_wants_reconcile(modified(memcached(), set_status))


def test_a_resource_version_only_update_does_not_enqueue():
    assert not primary_wants_reconcile(modified(memcached(), lambda o: None))


def test_a_label_change_without_generation_change_does_not_enqueue():
    def label(o):
        o["metadata"]["labels"] = {"team": "a"}

    assert not primary_wants_reconcile(modified(memcached(), label))


def test_a_generation_change_enqueues():
    def spec(o):
        o["spec"]["size"] = 3
        o["metadata"]["generation"] = 2

    assert primary_wants_reconcile(modified(memcached(), spec))


def test_a_finalizer_change_enqueues():
    def finalizer(o):
        o["metadata"]["finalizers"] = ["opsconsole.io/cleanup"]

    assert primary_wants_reconcile(modified(memcached(), finalizer))


def test_a_deletion_timestamp_enqueues():
    def delete(o):
        o["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    assert primary_wants_reconcile(modified(memcached(), delete))


@pytest.mark.parametrize("name", [RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT])
def test_the_manual_reconcile_annotation_enqueues_when_set_and_when_changed(name):
    def annotate(token):
        def mutate(o):
            o["metadata"].setdefault("annotations", {})[name] = token

        return mutate

    first = modified(memcached(), annotate("t1"))
    assert primary_wants_reconcile(first)
    assert primary_wants_reconcile(modified(first.obj, annotate("t2")))
    assert not primary_wants_reconcile(modified(first.obj, annotate("t1")))


def test_another_annotation_does_not_enqueue():
    def annotate(o):
        o["metadata"]["annotations"] = {"note": "x"}

    assert not primary_wants_reconcile(modified(memcached(), annotate))


def deployment(owner_uid="u-1", owner_name="m1", kind="Memcached", api_version="cache.example.com/v1alpha1",
               controller=True, rv="5"):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "m1", "namespace": "ns", "uid": "d-1", "resourceVersion": rv,
            "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": owner_uid,
                                 "controller": controller}],
        },
        "spec": {"replicas": 1},
        "status": {"readyReplicas": 0},
    }


def test_a_child_status_change_is_a_change_but_a_resource_version_bump_is_not():
    old = deployment()
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "6"
    assert not child_changed(InformerEvent("MODIFIED", DEPLOYMENT, new, old))
    new["status"]["readyReplicas"] = 1
    assert child_changed(InformerEvent("MODIFIED", DEPLOYMENT, new, old))


def test_the_owner_is_found_by_uid_in_the_owner_cache():
    cache = {"u-1": "cache.example.com/v1alpha1/memcacheds/ns/renamed"}
    keys = owner_keys(InformerEvent("ADDED", DEPLOYMENT, deployment()), [MEMCACHED],
                      lambda kind, uid: cache.get(uid) if kind == MEMCACHED else None)
    assert keys == {"cache.example.com/v1alpha1/memcacheds/ns/renamed"}


def test_an_unknown_uid_falls_back_to_the_reference_name_in_the_child_namespace():
    keys = owner_keys(InformerEvent("ADDED", DEPLOYMENT, deployment()), [MEMCACHED], lambda kind, uid: None)
    assert keys == {"cache.example.com/v1alpha1/memcacheds/ns/m1"}


def test_a_cluster_scoped_owner_key_has_no_namespace():
    child = deployment(owner_uid="t-1", owner_name="acme", kind="Tenant", api_version="tenancy.example.com/v1alpha1")
    keys = owner_keys(InformerEvent("ADDED", DEPLOYMENT, child), [MEMCACHED, TENANT], lambda kind, uid: None)
    assert keys == {"tenancy.example.com/v1alpha1/tenants//acme"}


def test_a_non_controller_reference_or_another_kind_enqueues_nothing():
    lookup = lambda kind, uid: "x"  # noqa: E731
    assert owner_keys(InformerEvent("ADDED", DEPLOYMENT, deployment(controller=False)), [MEMCACHED], lookup) == set()
    other_kind = deployment(kind="Other")
    assert owner_keys(InformerEvent("ADDED", DEPLOYMENT, other_kind), [MEMCACHED], lookup) == set()
    other_group = deployment(api_version="other.example.com/v1alpha1")
    assert owner_keys(InformerEvent("ADDED", DEPLOYMENT, other_group), [MEMCACHED], lookup) == set()


def test_a_moved_reference_enqueues_the_old_and_the_new_owner():
    old = deployment(owner_uid="u-1", owner_name="m1")
    new = deployment(owner_uid="u-2", owner_name="m2", rv="6")
    keys = owner_keys(InformerEvent("MODIFIED", DEPLOYMENT, new, old), [MEMCACHED], lambda kind, uid: None)
    assert keys == {"cache.example.com/v1alpha1/memcacheds/ns/m1", "cache.example.com/v1alpha1/memcacheds/ns/m2"}
