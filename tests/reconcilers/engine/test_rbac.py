"""The generated ClusterRole: current in deploy/kustomize/base/rbac.yaml, complete for what the kinds touch, least
privilege."""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.types import Result
from reconcilers.engine import registry
from reconcilers.engine.rbac import RbacError, cluster_role, cluster_role_yaml, reconciler_permissions
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.kinds.tenant import MACHINE, ROLE_BINDING, TenantReconciler

CHECKED_IN = Path(__file__).resolve().parents[3] / "deploy" / "kustomize" / "base" / "rbac.yaml"


def _verbs(role: dict[str, Any], group: str, resource: str, name: str | None = None) -> set[str]:
    verbs: set[str] = set()
    for rule in role["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            if name is None and "resourceNames" in rule:
                continue
            if name is not None and name not in rule.get("resourceNames", [name]):
                continue
            verbs |= set(rule["verbs"])
    return verbs


def test_the_checked_in_rbac_yaml_is_what_the_command_prints_now() -> None:
    out = io.StringIO()
    call_command("rbac", stdout=out)
    assert out.getvalue() == CHECKED_IN.read_text(encoding="utf-8"), \
        "regenerate: manage.py rbac > deploy/kustomize/base/rbac.yaml"


def test_check_flag_passes_on_the_current_file_and_fails_on_a_stale_one(tmp_path: Path) -> None:
    call_command("rbac", "--check", str(CHECKED_IN), stdout=io.StringIO())
    stale = tmp_path / "rbac.yaml"
    stale.write_text(CHECKED_IN.read_text(encoding="utf-8").replace("- watch\n", "", 1), encoding="utf-8")
    with pytest.raises(CommandError, match="stale"):
        call_command("rbac", "--check", str(stale), stdout=io.StringIO())


def test_every_kind_a_registered_reconciler_module_names_is_granted() -> None:
    role = cluster_role()
    for rec in registry.registered():
        module = importlib.import_module(type(rec).__module__)
        kinds = [v for v in vars(module).values() if isinstance(v, ResourceKind)]
        assert kinds
        for kind in kinds:
            assert {"get", "list"} <= _verbs(role, kind.group, kind.plural), f"{kind.plural}.{kind.group} not granted"


def test_own_resource_gets_status_update_and_finalizers_update_but_no_create_or_delete() -> None:
    role = cluster_role()
    # update: a rollback PUTs the restored spec
    assert _verbs(role, "cache.example.com", "memcacheds") == {"get", "list", "watch", "patch", "update"}
    assert _verbs(role, "cache.example.com", "memcacheds/status") == {"update"}
    # children carry blockOwnerDeletion: the apiserver requires update on the owner's finalizers
    assert _verbs(role, "cache.example.com", "memcacheds/finalizers") == {"update"}
    assert _verbs(role, "tenancy.example.com", "tenants/finalizers") == {"update"}


def test_a_finalizer_alone_needs_no_finalizers_subresource() -> None:
    from tests.reconcilers.testkinds import GadgetReconciler

    rec = GadgetReconciler()
    assert rec.finalizer and not rec.owns  # its finalizer is a patch of the object itself
    role = cluster_role([rec])
    assert _verbs(role, "test.opsconsole.io", "gadgets/finalizers") == set()
    assert "patch" in _verbs(role, "test.opsconsole.io", "gadgets")


def test_children_are_deleted_only_by_reconcilers_that_clean_up() -> None:
    role = cluster_role()
    assert "delete" not in _verbs(role, "apps", "deployments")
    assert "delete" not in _verbs(role, "", "services")
    assert {"create", "patch", "delete", "watch"} <= _verbs(role, "", "namespaces")
    assert "delete" in _verbs(role, "rbac.authorization.k8s.io", "rolebindings")
    assert _verbs(role, "", "pods") == {"get", "list"}


def test_bind_is_granted_on_exactly_the_cluster_role_tenants_reference() -> None:
    role = cluster_role()
    assert _verbs(role, "rbac.authorization.k8s.io", "clusterroles", "admin") == {"bind"}
    assert _verbs(role, "rbac.authorization.k8s.io", "clusterroles") == set()
    assert "ClusterRole admin" in cluster_role_yaml()


def test_leases_are_created_anywhere_but_read_and_updated_only_by_name() -> None:
    role = cluster_role()
    assert _verbs(role, "coordination.k8s.io", "leases") == {"create"}
    assert _verbs(role, "coordination.k8s.io", "leases", "opsconsole-controller") == {"create", "get", "update"}
    assert _verbs(role, "", "events") == {"create", "list", "watch"}


def test_no_wildcards_and_no_secrets() -> None:
    text = yaml.safe_dump(cluster_role())
    assert "'*'" not in text and "secrets" not in text


class _BinderWithoutRoles(Reconciler):
    resource: ClassVar[ResourceKind] = ResourceKind("x.example.com", "v1", "xs", "X")
    state_machine = MACHINE
    owns: ClassVar[tuple[ResourceKind, ...]] = (ROLE_BINDING,)

    def reconcile(self, ctx: Any, obj: dict[str, Any]) -> Result:
        return Result("Running")


def test_a_reconciler_owning_role_bindings_must_declare_the_roles_it_binds() -> None:
    with pytest.raises(RbacError, match="rbac_binds"):
        reconciler_permissions(_BinderWithoutRoles())


def test_permissions_follow_the_reconciler_declarations() -> None:
    tenant = reconciler_permissions(TenantReconciler())
    memcached = reconciler_permissions(MemcachedReconciler())
    assert ("rbac.authorization.k8s.io", "clusterroles", "admin") in tenant
    assert ("", "pods", "") in memcached and ("", "pods", "") not in tenant


def test_the_events_archive_may_watch_events_and_read_what_leads_a_pod_to_its_owner() -> None:
    role = cluster_role()
    assert _verbs(role, "", "events") == {"create", "list", "watch"}
    assert "get" in _verbs(role, "", "pods") and _verbs(role, "apps", "replicasets") == {"get", "list"}
    assert "get" in _verbs(role, "apps", "deployments")
    assert cluster_role([])["rules"]  # the engine's own rules stand without any kind registered
    assert _verbs(cluster_role([]), "", "pods") == {"get", "list"}  # the console's health tree lists them
