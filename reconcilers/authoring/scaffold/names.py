"""The scaffold's vocabulary: its defaults, the name rules, Kubernetes' own kinds, and the `Owned` and `Scaffold`
records that the checks build and the renderer reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_VERSION = "v1alpha1"
DEFAULT_IMAGE = "nginx:1.27-alpine"

KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
GROUP = re.compile(rf"^{DNS_LABEL}(\.{DNS_LABEL})+$")
CORE_OR_GROUP = re.compile(rf"^{DNS_LABEL}(\.{DNS_LABEL})*$")  # a child's group: `apps` has no dot
VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
PLURAL = re.compile(rf"^{DNS_LABEL}$")

#: modules a generated package must not shadow, besides the standard library and anything importable
PROJECT_MODULES = {"opsconsole", "reconcilers", "kubesim", "tests", "manage", "conftest"}

# (group, kind) → (plural, namespaced) of the Kubernetes kinds a kind may own or collide with
BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
    ("", "Pod"): ("pods", True), ("", "Service"): ("services", True), ("", "ConfigMap"): ("configmaps", True),
    ("", "Secret"): ("secrets", True), ("", "ServiceAccount"): ("serviceaccounts", True),
    ("", "PersistentVolumeClaim"): ("persistentvolumeclaims", True), ("", "Endpoints"): ("endpoints", True),
    ("", "Event"): ("events", True), ("", "LimitRange"): ("limitranges", True),
    ("", "ResourceQuota"): ("resourcequotas", True), ("", "PodTemplate"): ("podtemplates", True),
    ("", "ReplicationController"): ("replicationcontrollers", True), ("", "Binding"): ("bindings", True),
    ("", "Namespace"): ("namespaces", False), ("", "Node"): ("nodes", False),
    ("", "PersistentVolume"): ("persistentvolumes", False), ("", "ComponentStatus"): ("componentstatuses", False),
    ("apps", "Deployment"): ("deployments", True), ("apps", "StatefulSet"): ("statefulsets", True),
    ("apps", "DaemonSet"): ("daemonsets", True), ("apps", "ReplicaSet"): ("replicasets", True),
    ("apps", "ControllerRevision"): ("controllerrevisions", True),
    ("batch", "Job"): ("jobs", True), ("batch", "CronJob"): ("cronjobs", True),
    ("autoscaling", "HorizontalPodAutoscaler"): ("horizontalpodautoscalers", True),
    ("policy", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("coordination.k8s.io", "Lease"): ("leases", True),
    ("discovery.k8s.io", "EndpointSlice"): ("endpointslices", True),
    ("networking.k8s.io", "Ingress"): ("ingresses", True),
    ("networking.k8s.io", "NetworkPolicy"): ("networkpolicies", True),
    ("networking.k8s.io", "IngressClass"): ("ingressclasses", False),
    ("rbac.authorization.k8s.io", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("storage.k8s.io", "StorageClass"): ("storageclasses", False),
    ("storage.k8s.io", "CSIDriver"): ("csidrivers", False), ("storage.k8s.io", "CSINode"): ("csinodes", False),
    ("storage.k8s.io", "VolumeAttachment"): ("volumeattachments", False),
    ("scheduling.k8s.io", "PriorityClass"): ("priorityclasses", False),
    ("node.k8s.io", "RuntimeClass"): ("runtimeclasses", False),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("apiregistration.k8s.io", "APIService"): ("apiservices", False),
    ("certificates.k8s.io", "CertificateSigningRequest"): ("certificatesigningrequests", False),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): ("mutatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): ("validatingwebhookconfigurations", False),
}
#: built-in kind names a new kind may not take (kubectl and people would confuse them)
BUILTIN_KINDS = frozenset(kind for _, kind in BUILTIN) | {"Status", "List", "Scale", "TokenReview",
                                                           "SubjectAccessReview", "Eviction"}
WORKLOADS = {("apps", "Deployment"), ("apps", "StatefulSet")}


class ScaffoldError(ValueError):
    """An input or a target the scaffold refuses (nothing has been written)."""


def plural_of(kind: str) -> str:
    """The lower-case English plural of a kind: y → ies (after a consonant), s/x/z/ch/sh → es, else + s."""
    word = kind.lower()
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def snake(kind: str) -> str:
    """`ServiceAccount` → `service_account`, `CSIDriver` → `csi_driver`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", kind).lower()


@dataclass(frozen=True)
class Owned:
    """One `--owns` entry."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """The Python name of its manifest function and variable (`service_account`)."""
        return snake(self.kind)

    @property
    def const(self) -> str:
        return self.name.upper()

    @property
    def workload(self) -> bool:
        return (self.group, self.kind) in WORKLOADS


@dataclass(frozen=True)
class Scaffold:
    """What `write` writes: `directory` (the package, or with `project` the repository around it) and its files
    by relative path. `project`: the distribution's name when the kind is a repository of its own, else ""."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    package: str
    directory: Path
    owns: tuple[Owned, ...]
    files: dict[str, str]
    project: str = ""

    @property
    def reconciler_path(self) -> str:
        return f"{self.package}.kind.{self.kind}Reconciler"
