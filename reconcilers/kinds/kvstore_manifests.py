"""What a `KVStore` owns, as manifests: a headless Service, a StatefulSet spread across zones whose partition the
reconciler controls, and a PodDisruptionBudget. Pure functions of the object and its typed spec."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconcilers.kinds.names import label_value

#: the StatefulSet annotation naming the template it was last applied with (a change starts an upgrade)
TEMPLATE_HASH = "stateful.example.com/template-hash"
#: a StatefulSet name leaves room for "-<ordinal>" and the controller-revision-hash label's suffix
_STS_NAME_MAX = 52


def selector_labels(name: str) -> dict[str, str]:
    """The labels that select one KVStore's Pods."""
    return {"app.kubernetes.io/name": "kvstore", "app.kubernetes.io/instance": label_value(name)}


def child_name(name: str) -> str:
    """The name of a KVStore's StatefulSet, Service and PodDisruptionBudget."""
    short = label_value(name)
    return short if len(short) <= _STS_NAME_MAX else _hashed(name)


def _hashed(name: str) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:_STS_NAME_MAX - 9].replace('.', '-').rstrip('-')}-{digest}"


def _labels(name: str) -> dict[str, str]:
    return {**selector_labels(name), "app.kubernetes.io/managed-by": "opsconsole"}


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"name": child_name(meta["name"]), "namespace": meta.get("namespace", ""), "labels": _labels(meta["name"])}


def pod_template(obj: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The Pod template: one container, and a zone spread that leaves a Pod Pending rather than pack a zone."""
    name = obj["metadata"]["name"]
    spread = spec.zone_spread
    return {
        "metadata": {"labels": _labels(name)},
        "spec": {
            "topologySpreadConstraints": [{
                "maxSkew": spread.max_skew, "topologyKey": spread.topology_key,
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": selector_labels(name)},
                **({"minDomains": spread.min_domains} if spread.min_domains else {}),
            }],
            "containers": [{
                "name": "kvstore",
                "image": spec.image,
                "ports": [{"name": "kv", "containerPort": spec.port, "protocol": "TCP"}],
                "readinessProbe": {"tcpSocket": {"port": "kv"}, "periodSeconds": 5},
            }],
        },
    }


def template_hash(template: dict[str, Any]) -> str:
    """A short stable hash of a Pod template (the annotation that tells an upgrade is due)."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def statefulset_manifest(obj: dict[str, Any], spec: Any, partition: int) -> dict[str, Any]:
    """The StatefulSet: `spec.replicas` ordinal Pods, RollingUpdate held at `partition`."""
    template = pod_template(obj, spec)
    meta = _meta(obj)
    meta["annotations"] = {TEMPLATE_HASH: template_hash(template)}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
        "spec": {
            "replicas": spec.replicas,
            "serviceName": meta["name"],
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": selector_labels(obj["metadata"]["name"])},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
            "template": template,
        },
    }


def service_manifest(obj: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The headless Service that gives each ordinal its DNS name."""
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(obj),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": selector_labels(obj["metadata"]["name"]),
                 "ports": [{"name": "kv", "port": spec.port, "targetPort": "kv", "protocol": "TCP"}]},
    }


def pdb_manifest(obj: dict[str, Any], spec: Any) -> dict[str, Any]:
    """The PodDisruptionBudget: `spec.minAvailable` of the Pods stay Ready through any voluntary disruption."""
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _meta(obj),
        "spec": {"minAvailable": spec.min_available,
                 "selector": {"matchLabels": selector_labels(obj["metadata"]["name"])}},
    }
