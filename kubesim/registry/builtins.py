"""The built-in kinds kubesim serves (core, apps, batch, policy, coordination, events, rbac, admissionregistration,
apiextensions)."""

from __future__ import annotations

from typing import Any

from kubesim.registry import Registry, ResourceType, ScaleSpec

EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
EVENTS_V1_FIELDS = (
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "reason",
    "reportingController",
    "type",
)
POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)

# events.k8s.io/v1 <-> core/v1 field renames (same storage, as in the apiserver)
_EVENT_RENAMES = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
    ("reportingInstance", "reportingInstance"),
]


def _event_out(obj: dict[str, Any], version: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        new = next((b for a, b in _EVENT_RENAMES if a == k), k)
        out[new] = v
    out["apiVersion"] = f"events.k8s.io/{version}"
    return out


def _event_in(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        new = next((a for a, b in _EVENT_RENAMES if b == k), k)
        out[new] = v
    out["apiVersion"] = "v1"
    return out


def builtin_types() -> list[ResourceType]:
    """Fresh ResourceType objects for every built-in kind."""
    apps_scale = ScaleSpec()
    return [
        ResourceType("", ["v1"], "namespaces", "namespace", "Namespace", False, ["ns"], status=True,
                     verbs=["create", "delete", "get", "list", "patch", "update", "watch"],
                     field_selectors=("status.phase",)),
        ResourceType("", ["v1"], "pods", "pod", "Pod", True, ["po"], ["all"], status=True, return_deleted=True,
                     field_selectors=POD_FIELDS),
        ResourceType("", ["v1"], "services", "service", "Service", True, ["svc"], ["all"], status=True,
                     return_deleted=True),
        ResourceType("", ["v1"], "configmaps", "configmap", "ConfigMap", True, ["cm"]),
        ResourceType("", ["v1"], "secrets", "secret", "Secret", True, field_selectors=("type",)),
        ResourceType("", ["v1"], "serviceaccounts", "serviceaccount", "ServiceAccount", True, ["sa"]),
        ResourceType("", ["v1"], "resourcequotas", "resourcequota", "ResourceQuota", True, ["quota"], status=True),
        ResourceType("", ["v1"], "events", "event", "Event", True, ["ev"], field_selectors=EVENT_FIELDS),
        ResourceType("", ["v1"], "nodes", "node", "Node", False, ["no"], status=True,
                     field_selectors=("spec.unschedulable",)),
        ResourceType("apps", ["v1"], "deployments", "deployment", "Deployment", True, ["deploy"], ["all"],
                     status=True, scale=apps_scale, tracks_generation=True),
        ResourceType("apps", ["v1"], "replicasets", "replicaset", "ReplicaSet", True, ["rs"], ["all"],
                     status=True, scale=apps_scale, tracks_generation=True, field_selectors=("status.replicas",)),
        ResourceType("apps", ["v1"], "statefulsets", "statefulset", "StatefulSet", True, ["sts"], ["all"],
                     status=True, scale=apps_scale, tracks_generation=True),
        ResourceType("apps", ["v1"], "controllerrevisions", "controllerrevision", "ControllerRevision", True),
        ResourceType("batch", ["v1"], "jobs", "job", "Job", True, [], ["all"], status=True, tracks_generation=True),
        ResourceType("batch", ["v1"], "cronjobs", "cronjob", "CronJob", True, ["cj"], ["all"], status=True,
                     tracks_generation=True),
        ResourceType("policy", ["v1"], "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", True,
                     ["pdb"], status=True, tracks_generation=True),
        ResourceType("coordination.k8s.io", ["v1"], "leases", "lease", "Lease", True),
        ResourceType("events.k8s.io", ["v1"], "events", "event", "Event", True, ["ev"],
                     storage_key_override=("", "events"), convert_out=_event_out, convert_in=_event_in,
                     field_selectors=EVENTS_V1_FIELDS),
        ResourceType("rbac.authorization.k8s.io", ["v1"], "roles", "role", "Role", True),
        ResourceType("rbac.authorization.k8s.io", ["v1"], "rolebindings", "rolebinding", "RoleBinding", True),
        ResourceType("rbac.authorization.k8s.io", ["v1"], "clusterroles", "clusterrole", "ClusterRole", False),
        ResourceType("rbac.authorization.k8s.io", ["v1"], "clusterrolebindings", "clusterrolebinding",
                     "ClusterRoleBinding", False),
        ResourceType("admissionregistration.k8s.io", ["v1"], "mutatingwebhookconfigurations",
                     "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", False),
        ResourceType("admissionregistration.k8s.io", ["v1"], "validatingwebhookconfigurations",
                     "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", False),
        ResourceType("apiextensions.k8s.io", ["v1"], "customresourcedefinitions", "customresourcedefinition",
                     "CustomResourceDefinition", False, ["crd", "crds"], ["api-extensions"], status=True,
                     tracks_generation=True),
    ]


def builtin_registry() -> Registry:
    """A registry holding the built-in kinds."""
    reg = Registry()
    for rt in builtin_types():
        reg.add(rt)
    return reg
