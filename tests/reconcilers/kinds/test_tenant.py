"""TenantReconciler: namespace, quota and admins; an invalid quota fails; the finalizer cleans up."""

from __future__ import annotations

import pytest

from opsconsole.testing import FakeContext
from reconcilers.core.types import PermanentError
from reconcilers.kinds.tenant import FAILED, FINALIZER, PENDING, RUNNING, TERMINATING, TenantReconciler


def tenant(**spec):
    return {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant",
            "metadata": {"name": "acme", "uid": "t-1", "generation": 1}, "spec": spec, "status": {}}


def test_a_tenant_gets_a_namespace_a_quota_and_a_rolebinding_for_its_admins():
    ctx = FakeContext(tenant(admins=["alice", "bob", "alice"], quota={"cpu": "4", "memory": "8Gi", "pods": 20}))
    result = TenantReconciler().reconcile(ctx, ctx.obj)
    ns = ctx.find("v1", "Namespace", "", "tenant-acme")
    quota = ctx.find("v1", "ResourceQuota", "tenant-acme", "tenant-quota")
    rb = ctx.find("rbac.authorization.k8s.io/v1", "RoleBinding", "tenant-acme", "tenant-admins")
    assert ns["metadata"]["labels"]["tenancy.example.com/tenant"] == "acme"
    assert quota["spec"]["hard"] == {"cpu": "4", "memory": "8Gi", "pods": "20"}
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}
    assert [s["name"] for s in rb["subjects"]] == ["alice", "bob"]
    assert result.phase == RUNNING
    assert result.status == {"namespace": "tenant-acme", "admins": ["alice", "bob"]}


def test_the_namespace_name_can_be_chosen():
    ctx = FakeContext(tenant(namespace="team-a", admins=["alice"]))
    assert TenantReconciler().reconcile(ctx, ctx.obj).phase == RUNNING
    assert ctx.find("v1", "Namespace", "", "team-a") is not None


def test_a_tenant_whose_namespace_is_still_terminating_waits_in_pending():
    ctx = FakeContext(tenant(admins=["alice"]))
    ctx.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-acme"},
             "status": {"phase": "Terminating"}})
    result = TenantReconciler().reconcile(ctx, ctx.obj)
    assert result.phase == PENDING and result.requeue_after
    assert ctx.find("v1", "ResourceQuota", "tenant-acme", "tenant-quota") is None


@pytest.mark.parametrize("quota, reason", [
    ({"cpu": "lots"}, "InvalidQuota"), ({"memory": "-1Gi"}, "InvalidQuota"),
    ({"cpu": "4", "Bad Name!": "1"}, "InvalidQuota"), ({"cpu": "1.5.6"}, "InvalidQuota"),
    ({"pods": True}, "InvalidSpec"),  # not a quantity's type at all: the model refuses it, as the CRD does
])
def test_an_invalid_quota_is_a_permanent_error_before_anything_is_created(quota, reason):
    ctx = FakeContext(tenant(admins=["alice"], quota=quota))
    with pytest.raises(PermanentError) as info:
        TenantReconciler().reconcile(ctx, ctx.obj)
    assert info.value.reason == reason and "spec.quota" in info.value.message
    assert ctx.applied == []


def test_finalize_deletes_what_the_tenant_owns_and_waits_for_the_namespace_to_go():
    ctx = FakeContext(tenant(admins=["alice"], quota={"cpu": "1"}))
    rec = TenantReconciler()
    rec.reconcile(ctx, ctx.obj)
    ctx.keep_after_delete.add(("Namespace", "tenant-acme"))
    waiting = rec.finalize(ctx, ctx.obj)
    assert waiting is not None and waiting.phase == TERMINATING and waiting.requeue_after
    assert ("RoleBinding", "tenant-acme", "tenant-admins") in ctx.deleted
    assert ("ResourceQuota", "tenant-acme", "tenant-quota") in ctx.deleted
    ctx.keep_after_delete.clear()
    assert rec.finalize(ctx, ctx.obj) is None
    assert ctx.find("v1", "Namespace", "", "tenant-acme") is None


def test_finalize_leaves_a_namespace_it_does_not_own_alone():
    ctx = FakeContext(tenant(namespace="shared"))
    ctx.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shared", "labels": {}}})
    assert TenantReconciler().finalize(ctx, ctx.obj) is None
    assert ctx.deleted == []


def test_it_declares_a_finalizer_and_the_documented_lifecycle():
    assert TenantReconciler.finalizer == FINALIZER
    machine = TenantReconciler.state_machine
    for source, target in [("", PENDING), (PENDING, RUNNING), (RUNNING, TERMINATING), (TERMINATING, "Deleted"),
                           (PENDING, FAILED), (FAILED, PENDING)]:
        assert machine.allows(source, target)
    assert machine.is_terminal("Deleted")
