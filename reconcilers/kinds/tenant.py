"""The `Tenant` reconciler (tenancy.example.com/v1alpha1, cluster-scoped).

A Tenant gets a Namespace of its own (`spec.namespace`, default `tenant-<name>`), a ResourceQuota in it
(`spec.quota`: resource name → quantity) and a RoleBinding that makes each of `spec.admins` an admin there.
These are external to the Tenant's own namespace-less object, so the reconciler keeps a finalizer: deleting a
Tenant deletes the three and waits until the Namespace is gone before the finalizer is removed.

Phases: Pending → Running → Terminating → Deleted; Failed on an invalid quota (a permanent error: nothing is
created until the spec is fixed).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from kubernetes.utils.quantity import parse_quantity
from pydantic import Field

from reconcilers.core.kind import KindModel, PrinterColumn
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result
from reconcilers.kinds.names import LABEL_MAX, label_value

PENDING = "Pending"
RUNNING = "Running"
FAILED = "Failed"
TERMINATING = "Terminating"
DELETED = "Deleted"

TENANT = ResourceKind("tenancy.example.com", "v1alpha1", "tenants", "Tenant", namespaced=False)
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
RESOURCE_QUOTA = ResourceKind("", "v1", "resourcequotas", "ResourceQuota", namespaced=True)
ROLE_BINDING = ResourceKind("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True)

MACHINE = StateMachine.build(
    "Tenant",
    states=(PENDING, RUNNING, FAILED, TERMINATING, DELETED),
    initial=PENDING,
    transitions={
        PENDING: (RUNNING, FAILED, TERMINATING),
        RUNNING: (PENDING, FAILED, TERMINATING),
        FAILED: (PENDING, RUNNING, TERMINATING),
        TERMINATING: (DELETED,),
    },
    terminal=(DELETED,),
)

FINALIZER = "tenancy.example.com/cleanup"
QUOTA_NAME = "tenant-quota"
ROLE_BINDING_NAME = "tenant-admins"
ADMIN_CLUSTER_ROLE = "admin"
TENANT_LABEL = "tenancy.example.com/tenant"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# a resource name as ResourceQuota accepts it: cpu, requests.memory, count/deployments.apps, ...
_RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$")


class TenantSpec(KindModel):
    """Tenant gets a namespace of its own with a ResourceQuota and a RoleBinding for its admins."""

    namespace: str | None = Field(None, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Name of the tenant's namespace (default tenant-<name>)."""
    admins: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """Users who get the admin ClusterRole in the tenant's namespace."""
    quota: dict[str, int | str] = Field(default_factory=dict)
    """ResourceQuota hard limits, resource name to quantity (e.g. cpu "4", memory "8Gi")."""


class TenantStatus(KindModel):
    """What the Tenant reconciler adds to the status."""

    namespace: str | None = None
    """The tenant's namespace."""
    admins: list[str] | None = None
    """The admins bound in it."""


def tenant_namespace(obj: dict[str, Any]) -> str:
    """The Namespace a Tenant owns."""
    spec = obj.get("spec") or {}
    return spec.get("namespace") or f"tenant-{obj['metadata']['name']}"


def tenant_quota(quota: dict[str, int | str]) -> dict[str, str]:
    """`spec.quota` (types checked by the model) as ResourceQuota `hard` limits; PermanentError(reason=
    "InvalidQuota") when a resource name or a quantity is not one Kubernetes accepts, or a quantity is negative."""
    hard: dict[str, str] = {}
    for resource, value in sorted(quota.items()):
        if not _RESOURCE_NAME.match(resource):
            raise PermanentError(f"spec.quota: {resource!r} is not a resource name", reason="InvalidQuota")
        try:
            amount = parse_quantity(value)
        except ValueError:
            raise PermanentError(f"spec.quota.{resource}: {value!r} is not a quantity", reason="InvalidQuota") from None
        if amount < 0:
            raise PermanentError(f"spec.quota.{resource}: {value!r} must not be negative", reason="InvalidQuota")
        hard[resource] = str(value)
    return hard


class TenantReconciler(Reconciler):
    """Gives each tenant a namespace with a quota and admin rights for its admins; cleans up on delete."""

    resource: ClassVar[ResourceKind] = TENANT
    state_machine: ClassVar[StateMachine] = MACHINE
    spec_model: ClassVar[Any] = TenantSpec
    status_model: ClassVar[Any] = TenantStatus
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        PrinterColumn("Namespace", ".status.namespace", priority=1),
    )
    owns: ClassVar[tuple[ResourceKind, ...]] = (NAMESPACE, RESOURCE_QUOTA, ROLE_BINDING)
    finalizer: ClassVar[str | None] = FINALIZER
    #: ClusterRoles its RoleBindings reference (the RBAC generator grants `bind` on exactly these)
    rbac_binds: ClassVar[tuple[str, ...]] = (ADMIN_CLUSTER_ROLE,)
    ready_phases: ClassVar[tuple[str, ...]] = (RUNNING,)
    #: how often cleanup looks again whether the Namespace is gone
    cleanup_poll_seconds: ClassVar[float] = 0.5

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        """Validate, then create or patch the Namespace, the ResourceQuota and the RoleBinding."""
        spec: TenantSpec = ctx.spec
        name = obj["metadata"]["name"]
        namespace = spec.namespace or f"tenant-{name}"
        if not spec.namespace and len(namespace) > LABEL_MAX:
            raise PermanentError(
                f"the default namespace tenant-<name> is {len(namespace)} characters; a namespace name is at most "
                f"{LABEL_MAX} (a Tenant name at most {LABEL_MAX - len('tenant-')}): set spec.namespace",
                reason="InvalidSpec")
        if not _DNS_LABEL.match(namespace):
            raise PermanentError(f"spec.namespace {namespace!r} is not a valid namespace name", reason="InvalidSpec")
        owner_label = {TENANT_LABEL: label_value(name)}  # a name over 63 characters hashed to fit a label value
        hard = tenant_quota(spec.quota)
        admins = list(dict.fromkeys(spec.admins))
        ns = ctx.apply_child({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": owner_label},
        })
        ns_phase = (ns.get("status") or {}).get("phase") or "Active"
        if (ns.get("metadata") or {}).get("deletionTimestamp") or ns_phase == "Terminating":
            return Result(PENDING, "NamespaceTerminating", f"namespace {namespace} is still being deleted",
                          conditions=[ctx.condition("NamespaceReady", "False", "NamespaceTerminating")],
                          requeue_after=self.cleanup_poll_seconds)
        ctx.apply_child({
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": QUOTA_NAME, "namespace": namespace, "labels": owner_label},
            "spec": {"hard": hard},
        })
        ctx.apply_child({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": ROLE_BINDING_NAME, "namespace": namespace, "labels": owner_label},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ADMIN_CLUSTER_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": a} for a in admins],
        })
        if ns_phase != "Active":
            return Result(PENDING, "NamespaceNotActive", f"namespace {namespace} is {ns_phase}",
                          conditions=[ctx.condition("NamespaceReady", "False", "NamespaceNotActive")],
                          requeue_after=self.cleanup_poll_seconds)
        message = f"namespace {namespace} with quota {hard or '{}'} and {len(admins)} admin(s)"
        return Result(RUNNING, "Provisioned", message,
                      conditions=[ctx.condition("NamespaceReady", "True", "NamespaceActive", f"namespace {namespace}")],
                      status={"namespace": namespace, "admins": admins})

    def finalize(self, ctx: Context, obj: dict[str, Any]) -> Result | None:
        """Delete the RoleBinding, the ResourceQuota and the Namespace; done once the Namespace is gone."""
        namespace = tenant_namespace(obj)
        if _DNS_LABEL.match(namespace):
            ns = ctx.get(NAMESPACE, "", namespace)
            labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
            if ns is not None and labels.get(TENANT_LABEL) == label_value(obj["metadata"]["name"]):
                ctx.delete(ROLE_BINDING, namespace, ROLE_BINDING_NAME)
                ctx.delete(RESOURCE_QUOTA, namespace, QUOTA_NAME)
                ctx.delete(NAMESPACE, "", namespace)
                if ctx.get(NAMESPACE, "", namespace) is not None:
                    return Result(TERMINATING, "CleaningUp", f"waiting for namespace {namespace} to go",
                                  requeue_after=self.cleanup_poll_seconds)
        return None
