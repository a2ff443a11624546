"""Per-kind rules the apiserver applies on create and update: defaults, validation, immutable fields."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import itertools
from collections.abc import Callable
from typing import Any

from kubesim.cluster import batch_policy as bp
from kubesim.cluster.events import validate_event
from kubesim.cluster.podspec import Causes, default_pod_spec, validate_pod_spec
from kubesim.cluster.webhook_config import check_mutating, check_validating
from kubesim.errors import cause
from kubesim.meta import clone

_service_ips = itertools.count(10)


# ---- create ---------------------------------------------------------------------------------------------

def _pod_create(obj: dict[str, Any]) -> None:
    default_pod_spec(obj.setdefault("spec", {}), template=False)
    spec = obj["spec"]
    has_resources = any((c.get("resources") or {}) for c in spec.get("containers") or [] if isinstance(c, dict))
    obj["status"] = {"phase": "Pending", "qosClass": "Burstable" if has_resources else "BestEffort"}


def _workload_create(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    template = spec.setdefault("template", {})
    default_pod_spec(template.setdefault("spec", {}), template=True)
    template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    if obj["kind"] == "Deployment":
        spec.setdefault("strategy", {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
        if spec["strategy"].get("type") == "RollingUpdate":
            ru = spec["strategy"].setdefault("rollingUpdate", {})
            ru.setdefault("maxSurge", "25%")
            ru.setdefault("maxUnavailable", "25%")
        spec.setdefault("progressDeadlineSeconds", 600)
    elif obj["kind"] == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    obj["status"] = {"replicas": 0, "availableReplicas": 0} if obj["kind"] == "StatefulSet" else \
        {"replicas": 0} if obj["kind"] == "ReplicaSet" else {}


def _service_create(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        if not spec.get("clusterIP"):
            n = next(_service_ips)
            spec["clusterIP"] = str(ipaddress.IPv4Address("10.96.0.0") + n)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])
    obj["status"] = {"loadBalancer": {}}


def _namespace_create(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
    obj["status"] = {"phase": "Active"}
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


def _secret_create(obj: dict[str, Any]) -> None:
    if not obj.get("type"):
        obj["type"] = "Opaque"
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict):
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


def _secret_validate(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    for k, v in (obj.get("data") or {}).items():
        try:
            base64.b64decode(str(v), validate=True)
        except (binascii.Error, ValueError):
            causes.append(cause(f"data[{k}]", "FieldValueInvalid", "Invalid value: \"<secret contents redacted>\": "
                                "illegal base64 data"))
    return causes


def _workload_validate(obj: dict[str, Any]) -> Causes:
    from kubesim.selectors import selector_from_label_selector

    spec = obj.get("spec") or {}
    causes: Causes = []
    selector = spec.get("selector")
    if not selector:
        causes.append(cause("spec.selector", "FieldValueRequired", "Required value"))
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and not selector_from_label_selector(selector)({"metadata": {"labels": labels}}):
        causes.append(cause("spec.template.metadata.labels", "FieldValueInvalid",
                            f"Invalid value: map[string]string{labels}: `selector` does not match template `labels`"))
    replicas = spec.get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        causes.append(cause("spec.replicas", "FieldValueInvalid",
                            f"Invalid value: {replicas}: must be greater than or equal to 0"))
    causes.extend(validate_pod_spec(template.get("spec"), "spec.template.spec"))
    return causes


PREPARE_CREATE: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("", "pods"): _pod_create,
    ("", "services"): _service_create,
    ("", "namespaces"): _namespace_create,
    ("", "secrets"): _secret_create,
    ("apps", "deployments"): _workload_create,
    ("apps", "replicasets"): _workload_create,
    ("apps", "statefulsets"): _workload_create,
    ("batch", "jobs"): bp.job_create,
    ("batch", "cronjobs"): bp.cronjob_create,
    ("policy", "poddisruptionbudgets"): bp.pdb_create,
}

VALIDATE: dict[tuple[str, str], Callable[[dict[str, Any]], Causes]] = {
    ("", "pods"): lambda o: validate_pod_spec(o.get("spec"), "spec"),
    ("", "secrets"): _secret_validate,
    ("", "events"): validate_event,
    ("events.k8s.io", "events"): validate_event,
    ("apps", "deployments"): _workload_validate,
    ("apps", "replicasets"): _workload_validate,
    ("apps", "statefulsets"): _workload_validate,
    ("batch", "jobs"): bp.job_validate,
    ("batch", "cronjobs"): bp.cronjob_validate,
    ("policy", "poddisruptionbudgets"): bp.pdb_validate,
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): check_mutating,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): check_validating,
}


# ---- update ---------------------------------------------------------------------------------------------

def _pod_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    """Pod spec is immutable except images, activeDeadlineSeconds and added tolerations."""
    old_spec, new_spec = clone(old.get("spec") or {}), clone(new.get("spec") or {})
    default_pod_spec(new_spec, template=False)
    new["spec"] = new_spec
    for key in ("containers", "initContainers"):
        for a, b in zip(old_spec.get(key) or [], new_spec.get(key) or [], strict=False):
            if isinstance(a, dict) and isinstance(b, dict):
                a["image"] = b.get("image")
    old_spec["activeDeadlineSeconds"] = new_spec.get("activeDeadlineSeconds")
    old_spec["tolerations"] = new_spec.get("tolerations")
    for s in (old_spec, new_spec):
        if s.get("activeDeadlineSeconds") is None:
            s.pop("activeDeadlineSeconds", None)
        if s.get("tolerations") is None:
            s.pop("tolerations", None)
    if old_spec != new_spec:
        return [cause("spec", "FieldValueForbidden", "Forbidden: pod updates may not change fields other than "
                      "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                      "`spec.tolerations` (only additions to existing tolerations),"
                      "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")]
    return []


def _service_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    spec = new.setdefault("spec", {})
    old_ip = (old.get("spec") or {}).get("clusterIP")
    if not spec.get("clusterIP"):
        for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if k in (old.get("spec") or {}):
                spec[k] = clone(old["spec"][k])
    elif spec["clusterIP"] != old_ip:
        return [cause("spec.clusterIPs[0]", "FieldValueInvalid",
                      f'Invalid value: []string{{"{spec["clusterIP"]}"}}: may not change once set')]
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])
    return []


def _namespace_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    new["spec"] = clone(old.get("spec") or {})
    labels = new["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = new["metadata"]["name"]
    return []


def _workload_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    spec = new.setdefault("spec", {})
    tmp = {"kind": new["kind"], "spec": spec, "metadata": {}}
    _workload_create(tmp)
    if spec.get("selector") != (old.get("spec") or {}).get("selector"):
        return [cause("spec.selector", "FieldValueInvalid", f"Invalid value: {spec.get('selector')}: field is "
                      "immutable")]
    return []


def _immutable_data_update(new: dict[str, Any], old: dict[str, Any]) -> Causes:
    if new.get("kind") == "Secret":
        _secret_create(new)
    if old.get("immutable"):
        for key in ("data", "binaryData", "immutable"):
            if new.get(key) != old.get(key):
                return [cause(key if key != "immutable" else "immutable", "FieldValueForbidden",
                              "Forbidden: field is immutable when `immutable` is set")]
    return []


PREPARE_UPDATE: dict[tuple[str, str], Callable[[dict[str, Any], dict[str, Any]], Causes]] = {
    ("", "pods"): _pod_update,
    ("", "services"): _service_update,
    ("", "namespaces"): _namespace_update,
    ("", "configmaps"): _immutable_data_update,
    ("", "secrets"): _immutable_data_update,
    ("apps", "deployments"): _workload_update,
    ("apps", "replicasets"): _workload_update,
    ("apps", "statefulsets"): _workload_update,
    ("batch", "jobs"): bp.job_update,
    ("batch", "cronjobs"): bp.cronjob_update,
}
