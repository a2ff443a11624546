"""Scaffolding a new kind (`manage.py startkind`): a Python package with the kind, a sample and a test.

`plan(...)` checks every input and the target, and renders every file in memory; it raises `ScaffoldError`
(naming what is wrong) before anything is written. `write(scaffold)` then writes the files, all or none (into
a temporary directory beside the target, renamed into place). The templates are the Python string templates
below (no package data).

The generated kind follows `reconcilers/kinds/memcached.py`: a typed spec (a `KindModel`), the
Pending → Running / Degraded / Failed machine, `spec_change_phase = "Pending"`, one child per `--owns` entry
(Deployment, StatefulSet, Service, ConfigMap, Secret, ServiceAccount and Namespace have templates; any other
kind gets its metadata only) and a phase derived from the children: the rollout of its Deployment or
StatefulSet, judged by `reconcilers.core.rollout.rollout_status` (the generated code calls it; it copies no rule).
A kind that owns a Deployment also gets `spec.progressDeadlineSeconds` (the Deployment's own: a rollout that makes
no progress for that long is Failed) and tests that a broken image is not reported ready and is rolled back.
Owner and children must agree on scope: a namespaced kind owns only
namespaced kinds (Kubernetes' garbage collector refuses a cluster-scoped dependent of a namespaced owner), and
a cluster-scoped kind here owns only cluster-scoped kinds (a namespaced child needs a namespace, which the
author then takes from the spec, as `reconcilers/kinds/tenant.py` does).
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import os
import re
import shutil
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from string import Template

import yaml

from reconcilers.engine import registry

DEFAULT_VERSION = "v1alpha1"
DEFAULT_IMAGE = "nginx:1.27-alpine"

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_GROUP = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})+$")
_CORE_OR_GROUP = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")  # a child's group: `apps` has no dot
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_PLURAL = re.compile(rf"^{_DNS_LABEL}$")

#: modules a generated package must not shadow, besides the standard library and anything importable
_PROJECT_MODULES = {"opsconsole", "reconcilers", "kubesim", "tests", "manage", "conftest"}

# (group, kind) → (plural, namespaced) of the Kubernetes kinds a kind may own or collide with
_BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
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
BUILTIN_KINDS = frozenset(kind for _, kind in _BUILTIN) | {"Status", "List", "Scale", "TokenReview",
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


def _snake(kind: str) -> str:
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
        return _snake(self.kind)

    @property
    def const(self) -> str:
        return self.name.upper()

    @property
    def workload(self) -> bool:
        return (self.group, self.kind) in WORKLOADS


@dataclass(frozen=True)
class Scaffold:
    """What `write` writes: `directory` (the package) and its files by relative path."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    package: str
    directory: Path
    owns: tuple[Owned, ...]
    files: dict[str, str]

    @property
    def reconciler_path(self) -> str:
        return f"{self.package}.kind.{self.kind}Reconciler"


# -- checks --------------------------------------------------------------------------------------------------


def _check_kind(kind: str) -> None:
    if not _KIND.match(kind) or not kind.isidentifier() or keyword.iskeyword(kind):
        raise ScaffoldError(f"kind {kind!r} must be UpperCamelCase: a letter A-Z, then letters and digits "
                            "(at most 63 characters), e.g. Website")
    if kind in BUILTIN_KINDS:
        raise ScaffoldError(f"kind {kind!r} is a built-in Kubernetes kind; choose another name")
    for rec in registry.registered():
        if rec.resource.kind.lower() == kind.lower():
            raise ScaffoldError(f"kind {kind!r} collides with the registered kind {rec.resource.kind} "
                                f"({rec.resource.plural}.{rec.resource.group}, {type(rec).__module__})")


def _check_group(group: str) -> None:
    if len(group) > 253 or not _GROUP.match(group):
        raise ScaffoldError(f"group {group!r} must be a DNS subdomain with at least one dot, in lower case "
                            "(e.g. web.example.com)")
    if group.endswith((".k8s.io", ".kubernetes.io")) or group in ("k8s.io", "kubernetes.io"):
        raise ScaffoldError(f"group {group!r} is reserved for Kubernetes' own APIs; use a domain of yours")


def _check_version(version: str, what: str = "version") -> None:
    if not _VERSION.match(version):
        raise ScaffoldError(f"{what} {version!r} is not a Kubernetes API version (v1, v1alpha1, v2beta3, ...)")


def parse_owns(text: str) -> tuple[Owned, ...]:
    """`apps/v1/Deployment,v1/Service` → the Owned entries (plural and scope from Kubernetes' kinds or the
    registered ones, else the English plural and namespaced); ScaffoldError naming a bad entry."""
    out: list[Owned] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split("/")
        if len(parts) not in (2, 3):
            raise ScaffoldError(f"--owns entry {entry!r} must be group/version/Kind (apps/v1/Deployment) "
                                "or version/Kind for the core group (v1/Service)")
        group, version, kind = parts if len(parts) == 3 else ("", *parts)
        if len(parts) == 3 and not _CORE_OR_GROUP.match(group):
            raise ScaffoldError(f"--owns entry {entry!r}: {group!r} is not an API group")
        _check_version(version, f"--owns entry {entry!r}: version")
        if not _KIND.match(kind):
            raise ScaffoldError(f"--owns entry {entry!r}: {kind!r} is not a kind (UpperCamelCase)")
        plural, namespaced = _BUILTIN.get((group, kind), (plural_of(kind), True))
        for rec in registry.registered():
            if (rec.resource.group, rec.resource.kind) == (group, kind):
                plural, namespaced = rec.resource.plural, rec.resource.namespaced
        if any(o.kind == kind for o in out) or any(o.name == _snake(kind) for o in out):
            raise ScaffoldError(f"--owns names {kind} twice; a kind owns one child of each kind here")
        out.append(Owned(group, version, kind, plural, namespaced))
    return tuple(out)


def _check_scope(namespaced: bool, owns: tuple[Owned, ...]) -> None:
    if namespaced:
        cluster = [o for o in owns if not o.namespaced]
        if cluster:
            names = ", ".join(f"{o.api_version}/{o.kind}" for o in cluster)
            raise ScaffoldError(f"a namespaced kind cannot own cluster-scoped kinds ({names}): Kubernetes' "
                                "garbage collector does not let a cluster-scoped object depend on a namespaced "
                                "one; use --cluster-scoped, or drop them from --owns")
    else:
        local = [o for o in owns if o.namespaced]
        if local:
            names = ", ".join(f"{o.api_version}/{o.kind}" for o in local)
            raise ScaffoldError(f"--cluster-scoped with namespaced --owns kinds ({names}): their objects need a "
                                "namespace, which a cluster-scoped kind does not have. Make the kind namespaced "
                                "(drop --cluster-scoped), or own only cluster-scoped kinds (v1/Namespace, "
                                "rbac.authorization.k8s.io/v1/ClusterRole, ...) and add the namespaced children "
                                "yourself in a namespace named by the spec, as reconcilers/kinds/tenant.py does")


def _check_package(package: str, directory: Path) -> None:
    if not package.isidentifier() or keyword.iskeyword(package) or not package.islower():
        raise ScaffoldError(f"package name {package!r} (from {directory}) is not a lower-case Python identifier; "
                            "name the directory like a module (e.g. --package website)")
    shadowed = package in sys.stdlib_module_names or package in _PROJECT_MODULES
    if not shadowed:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        # an importable module of that name, other than the (empty) target directory itself
        shadowed = spec is not None and directory not in [Path(p).resolve() for p in
                                                          spec.submodule_search_locations or ()]
    if shadowed:
        raise ScaffoldError(f"package name {package!r} would shadow the module {package!r}; choose another "
                            "(--package DIR)")


def _check_target(directory: Path, files: dict[str, str]) -> None:
    if directory.exists() and not directory.is_dir():
        raise ScaffoldError(f"{directory} exists and is not a directory; refusing to overwrite it")
    if directory.is_dir():
        taken = [str(directory / name) for name in files if (directory / name).exists()]
        if taken:
            raise ScaffoldError(f"refusing to overwrite {', '.join(taken)}")
        if any(directory.iterdir()):
            raise ScaffoldError(f"{directory} exists and is not empty; refusing to write into it")
    if not directory.parent.is_dir():
        raise ScaffoldError(f"{directory.parent} is not a directory")


# -- the plan and the writing --------------------------------------------------------------------------------


def plan(kind: str, group: str, *, version: str = DEFAULT_VERSION, owns: str = "", cluster_scoped: bool = False,
         package_dir: str | os.PathLike[str] | None = None, plural: str | None = None,
         cwd: str | os.PathLike[str] | None = None) -> Scaffold:
    """Check everything and render every file; ScaffoldError (nothing written) naming the first problem."""
    _check_kind(kind)
    _check_group(group)
    _check_version(version)
    plural = plural or plural_of(kind)
    if not _PLURAL.match(plural):
        raise ScaffoldError(f"plural {plural!r} must be a lower-case DNS label (e.g. websites)")
    owned = parse_owns(owns)
    namespaced = not cluster_scoped
    _check_scope(namespaced, owned)
    base = Path(cwd) if cwd is not None else Path.cwd()
    directory = (base / (package_dir if package_dir else kind.lower())).resolve()
    package = directory.name
    _check_package(package, directory)
    for rec in registry.registered():
        if (rec.resource.group, rec.resource.plural) == (group, plural):
            raise ScaffoldError(f"{plural}.{group} is already reconciled by the registered kind {rec.resource.kind}")
    scaffold = Scaffold(kind, group, version, plural, namespaced, package, directory, owned, {})
    files = render(scaffold)
    _check_target(directory, files)
    for name, text in files.items():
        if name.endswith(".py"):
            compile(text, name, "exec")  # a template bug fails here, before anything is written
    return Scaffold(kind, group, version, plural, namespaced, package, directory, owned, files)


def write(scaffold: Scaffold) -> list[Path]:
    """Write the package: into a temporary directory beside the target, then renamed into place (all or none).
    Returns the paths written."""
    parent = scaffold.directory.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{scaffold.package}-", dir=parent))
    try:
        for name, text in scaffold.files.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if scaffold.directory.is_dir():
            scaffold.directory.rmdir()  # empty (checked): the rename takes its place
        os.rename(tmp, scaffold.directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [scaffold.directory / name for name in scaffold.files]


def next_steps(scaffold: Scaffold, shown_dir: str) -> str:
    """What to do next, as printed by the command (`shown_dir`: the package directory as the user named it)."""
    s = scaffold
    lower = s.kind.lower()
    parent = s.directory.parent
    pythonpath = "" if parent == Path.cwd().resolve() else f"PYTHONPATH={parent} "
    env = f"{pythonpath}OPSCONSOLE_RECONCILERS={s.reconciler_path}"
    return "\n".join([
        "Next steps:",
        f"  1. Edit {shown_dir}/kind.py: the spec model (# your fields here), the children and reconcile().",
        f"  2. Run its tests:   {pythonpath}pytest {shown_dir}",
        f"  3. See its CRD:     {env} python manage.py crds {s.kind}",
        f"  4. Run it:          {env} make run",
        f"  5. Apply the sample: kubectl --kubeconfig data/kubeconfig apply -f {shown_dir}/samples/{lower}.yaml",
        f"     and watch it:     kubectl --kubeconfig data/kubeconfig get {s.plural}.{s.group} -w",
        "  6. Package it: in your project's pyproject.toml (then `pip install -e .`: no OPSCONSOLE_RECONCILERS needed)",
        '       [project.entry-points."opsconsole.kinds"]',
        f'       {s.kind.lower()} = "{s.package}.kind:{s.kind}Reconciler"',
    ])


# -- rendering -----------------------------------------------------------------------------------------------


def render(s: Scaffold) -> dict[str, str]:
    """Every file of the package by relative path."""
    lower = s.kind.lower()
    return {
        "__init__.py": f'"""The {s.kind} kind ({s.group}/{s.version}) for opsconsole: see kind.py."""\n',
        "kind.py": render_kind(s),
        f"samples/{lower}.yaml": render_sample(s),
        "tests/__init__.py": "",
        f"tests/test_{lower}.py": render_test(s),
    }


def sample_object(s: Scaffold) -> dict[str, object]:
    """The sample custom resource."""
    spec: dict[str, object] = {}
    if any(o.workload for o in s.owns):
        spec.update(image=DEFAULT_IMAGE, replicas=2)
    if _has_port(s):
        spec["port"] = 80
    spec["labels"] = {"team": "platform"}
    return {"apiVersion": f"{s.group}/{s.version}", "kind": s.kind, "metadata": {"name": f"{s.kind.lower()}-sample"},
            "spec": spec}


def render_sample(s: Scaffold) -> str:
    head = (f"# A sample {s.kind}: kubectl --kubeconfig data/kubeconfig apply -f "
            f"{s.package}/samples/{s.kind.lower()}.yaml\n")
    return head + yaml.safe_dump(sample_object(s), sort_keys=False, default_flow_style=False)


def _has_port(s: Scaffold) -> bool:
    return any(o.workload or (o.group, o.kind) == ("", "Service") for o in s.owns)


_KIND_TEMPLATE = Template('''\
"""The `$kind` kind ($group/$version, $scope), scaffolded by `manage.py startkind`.

$summary

$phases
- Failed: ${failed}a permanent error, e.g. a spec the engine refuses (reason InvalidSpec, naming each bad field);
- Terminating / Deleted: set by the engine around deletion (the children carry an ownerReference to the
  $kind, so Kubernetes deletes them with it).
$scope_note
Edit the spec model (`# your fields here`), the child manifests and `reconcile()`. The CRD is generated from
this file: `OPSCONSOLE_RECONCILERS=$package.kind.${kind}Reconciler python manage.py crds $kind`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from reconcilers.core.kind import KindModel, PrinterColumn
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
${rollout_import}from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result

PENDING = "Pending"
RUNNING = "Running"
DEGRADED = "Degraded"
FAILED = "Failed"
TERMINATING = "Terminating"
DELETED = "Deleted"

$resources

MACHINE = StateMachine.build(
    "$kind",
    states=(PENDING, RUNNING, DEGRADED, FAILED, TERMINATING, DELETED),
    initial=PENDING,
    transitions={
        PENDING: (RUNNING, FAILED, TERMINATING),
        RUNNING: (PENDING, DEGRADED, FAILED, TERMINATING),
        DEGRADED: (PENDING, RUNNING, FAILED, TERMINATING),
        FAILED: (PENDING, RUNNING, TERMINATING),
        TERMINATING: (DELETED,),
    },
    terminal=(DELETED,),
)

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$$")


def _valid_labels(labels: dict[str, str]) -> dict[str, str]:
    """A check the CRD cannot express (its schema does not constrain map keys), so the engine makes it before
    each reconcile: a bad label makes the $kind Failed with reason InvalidSpec."""
    for key, value in labels.items():
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value):
            raise ValueError(f"{key}={value} is not a valid Kubernetes label")
    return labels


class ${kind}Spec(KindModel):
    """The desired state of a $kind (fields in snake_case here, camelCase in the object)."""

    # your fields here: each one becomes spec.<camelCase> in the CRD, its docstring the description
$fields    labels: Annotated[dict[str, str], AfterValidator(_valid_labels)] = Field(default_factory=dict)
    """Labels added to $labels_target."""

$status_model
def short_name(name: str) -> str:
    """`name` when it fits a label value and a DNS label (63 characters; names go to 253), else its first 50
    characters (dots made dashes), '-' and 8 hex digits of its sha256, as Kubernetes controllers shorten names."""
    if len(name) <= 63:
        return name
    return name[:50].replace(".", "-") + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]


def selector_labels(obj: dict[str, Any]) -> dict[str, str]:
    """The labels that pick out what one $kind created (a long name hashed to fit a label value)."""
    return {"app.kubernetes.io/name": "$lower", "app.kubernetes.io/instance": short_name(obj["metadata"]["name"])}


def child_metadata(obj: dict[str, Any], spec: ${kind}Spec) -> dict[str, Any]:
    """A child's metadata: named after the $kind$in_namespace (shortened like its label when longer than 63
    characters: a Service's name is a DNS label), with its labels."""
    labels = {**spec.labels, **selector_labels(obj), "app.kubernetes.io/managed-by": "opsconsole"}
    return {"name": short_name(obj["metadata"]["name"]),$namespace_field "labels": labels}
$manifests

class ${kind}Reconciler(Reconciler):
    """$doc"""

    resource = $const
    state_machine = MACHINE
    spec_model = ${kind}Spec
$status_decl    owns = ($owns_tuple)
    ready_phases = (RUNNING,)
    #: every spec change goes back through Pending (the engine records it; see Reconciler.spec_change_phase)
    spec_change_phase = PENDING
    short_names = ()  # e.g. ("$short",): kubectl get $short
    printer_columns = (
$columns    )
$poll
    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
$reconcile''')


_WORKLOAD_FIELDS = f'''\
    image: str = Field("{DEFAULT_IMAGE}", min_length=1)
    """Container image."""
    replicas: int = Field(1, ge=0, le=100)
    """Number of pods."""
'''
_DEADLINE_FIELD = '''\
    progress_deadline_seconds: int = Field(600, ge=1)
    """Seconds the rollout may make no progress before it is Failed (the Deployment's progressDeadlineSeconds)."""
'''
_PORT_FIELD = '''\
    port: int = Field(80, ge=1, le=65535)
    """Port the pods listen on$and_service."""
'''

_STATUS_MODEL = Template('''
class ${kind}Status(KindModel):
    """What the reconciler adds to the status (the engine writes phase, reason, message and conditions)."""

    # your status fields here (return them in Result.status, in camelCase)
    ready_replicas: int | None = None
    """Ready pods of the current spec."""

''')

_CONTAINER = Template('''

def container(spec: ${kind}Spec) -> dict[str, Any]:
    """The pods' container."""
    return {"name": "$lower", "image": spec.image,
            "ports": [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}]}
''')

_WORKLOAD = Template('''

def ${name}_manifest(obj: dict[str, Any], spec: ${kind}Spec) -> dict[str, Any]:
    """The $child: spec.replicas pods of spec.image."""
    meta = child_metadata(obj, spec)
    return {
        "apiVersion": "$api_version",
        "kind": "$child",
        "metadata": meta,
        "spec": {
            "replicas": spec.replicas,$service_name$deadline
            "selector": {"matchLabels": selector_labels(obj)},
            "template": {"metadata": {"labels": meta["labels"]}, "spec": {"containers": [container(spec)]}},
        },
    }
''')

_SERVICE = Template('''

def service_manifest(obj: dict[str, Any], spec: ${kind}Spec) -> dict[str, Any]:
    """The Service in front of the $kind's pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(obj, spec),
        "spec": {
            "selector": selector_labels(obj),
            "ports": [{"name": "http", "port": spec.port, "targetPort": $target_port, "protocol": "TCP"}],
        },
    }
''')

_SIMPLE = Template('''

def ${name}_manifest(obj: dict[str, Any], spec: ${kind}Spec) -> dict[str, Any]:
    """The $child."""
    return {
        "apiVersion": "$api_version",
        "kind": "$child",
        "metadata": child_metadata(obj, spec),$body
    }
''')

_SIMPLE_BODIES = {
    ("", "ConfigMap"): '\n        "data": {},  # your configuration here (file name → content)',
    ("", "Secret"): '\n        "type": "Opaque",\n        "data": {},  # your keys here (values base64-encoded)',
    ("", "ServiceAccount"): "",
    ("", "Namespace"): "",
}


def _child_functions(s: Scaffold) -> str:
    out = []
    if any(o.workload for o in s.owns):
        out.append(_CONTAINER.substitute(kind=s.kind, lower=s.kind.lower()))
    for o in s.owns:
        if o.workload:
            service_name = '\n            "serviceName": short_name(meta["name"]),' if o.kind == "StatefulSet" else ""
            deadline = ('\n            "progressDeadlineSeconds": spec.progress_deadline_seconds,'
                        if o.kind == "Deployment" else "")
            out.append(_WORKLOAD.substitute(kind=s.kind, name=o.name, child=o.kind, api_version=o.api_version,
                                            service_name=service_name, deadline=deadline))
        elif (o.group, o.kind) == ("", "Service"):
            target = '"http"' if any(c.workload for c in s.owns) else "spec.port"
            out.append(_SERVICE.substitute(kind=s.kind, target_port=target))
        else:
            body = _SIMPLE_BODIES.get((o.group, o.kind), f"\n        # the rest of the {o.kind} here (its spec)")
            out.append(_SIMPLE.substitute(kind=s.kind, name=o.name, child=o.kind, api_version=o.api_version,
                                          body=body))
    return "".join(out)


def _reconcile_body(s: Scaffold) -> str:
    if not s.owns:
        return '''\
        """Say where the $kind stands."""
        # your reconcile here: the typed spec is ctx.spec; apply children with ctx.apply_child(manifest) (and
        # declare their kinds in `owns`), read others with ctx.get / ctx.list; return where the $kind stands
        return Result(RUNNING, "Ready", "nothing to do yet")
'''.replace("$kind", s.kind)
    workloads = [o for o in s.owns if o.workload]
    lines = [f'        """Apply the children, then derive the phase from {_readiness_subject(s)}."""',
             f"        spec: {s.kind}Spec = ctx.spec"]
    for o in s.owns:
        call = f"ctx.apply_child({o.name}_manifest(obj, spec))"
        lines.append(f"        {o.name} = {call}" if o.workload else f"        {call}")
    if not workloads:
        names = " and ".join(f"{o.kind}" for o in s.owns)
        lines += [
            "        # your readiness checks here: apply_child returns each child as the API has it, with its status",
            f'        return Result(RUNNING, "Ready", "{names} applied")',
        ]
        return "\n".join(lines) + "\n"
    judged = (f"rollout_status({workloads[0].name})" if len(workloads) == 1
              else f"worst([{', '.join(f'rollout_status({o.name})' for o in workloads)}])")
    lines += [
        "        # where the rollout of the current spec stands, by kubectl rollout status' rules: complete,",
        "        # progressing or failed (a broken image's new pods never become ready, while old pods still serve)",
        f"        rollout = {judged}",
        '        counts = f"{rollout.ready}/{spec.replicas} replicas ready"',
        '        status = {"readyReplicas": rollout.ready}',
        "        if rollout.complete:",
        '            return Result(RUNNING, "AllReplicasReady", counts, status=status,',
        '                          conditions=[ctx.condition("Available", "True", "AllReplicasReady", counts)])',
        '        message = f"{counts}: {rollout.message}"',
        '        available = ctx.condition("Available", "False", rollout.reason, rollout.message)',
        "        if rollout.failed:  # it will not finish by itself: Failed, which automatic rollback acts on",
        "            return Result(FAILED, rollout.reason, message, status=status, conditions=[available])",
        "        # not yet: rolling out (Pending), or it was Running and lost pods (Degraded). A change of a child",
        "        # runs this again (they are owned); requeue_after looks again meanwhile",
        '        was = (obj.get("status") or {}).get("phase")',
        '        phase, reason = (DEGRADED, "ReplicasNotReady") if was in (RUNNING, DEGRADED) else '
        '(PENDING, "RollingOut")',
        "        return Result(phase, reason, message, status=status, requeue_after=self.poll_seconds,",
        "                      conditions=[available])",
    ]
    return "\n".join(lines) + "\n"


def _readiness_subject(s: Scaffold) -> str:
    workloads = [o.kind for o in s.owns if o.workload]
    if not workloads:
        return "them"
    return "the rollout of the " + " and the ".join(workloads)


def render_kind(s: Scaffold) -> str:
    lower = s.kind.lower()
    workloads = [o for o in s.owns if o.workload]
    const = _snake(s.kind).upper()
    resources = [f'{const} = ResourceKind("{s.group}", "{s.version}", "{s.plural}", "{s.kind}", '
                 f"namespaced={s.namespaced})"]
    for o in s.owns:
        if (o.group, o.kind) not in _BUILTIN:
            resources.append(f"# {o.kind}: check the plural and the scope (namespaced or not)")
        resources.append(f'{o.const} = ResourceKind("{o.group}", "{o.version}", "{o.plural}", "{o.kind}", '
                         f"namespaced={o.namespaced})")
    children = " and ".join(f"a {o.kind}" for o in s.owns)
    if workloads:
        summary = (f"A {s.kind} runs spec.replicas pods of spec.image; it owns {children}, named after it.")
        phases = ("- Pending: the current spec is rolling out (a new object; every spec change goes back through "
                  "Pending);\n- Running: the rollout of the current spec is complete (every replica updated and "
                  "available:\n  reconcilers.core.rollout.rollout_status, kubectl rollout status' rules);\n"
                  "- Degraded: it was Running and the rollout is no longer complete (pods lost);")
        service = " behind a Service" if any((o.group, o.kind) == ("", "Service") for o in s.owns) else ""
        doc = f"Runs spec.replicas pods of spec.image in a {' and a '.join(o.kind for o in workloads)}{service}."
    elif s.owns:
        summary = f"A {s.kind} owns {children}, named after it."
        phases = ("- Pending: a new object, or a spec change being applied;\n- Running: its children are applied;\n"
                  "- Degraded: not used yet (for when a child stops being ready);")
        doc = f"Keeps {children} in line with the {s.kind}'s spec."
    else:
        summary = f"A {s.kind} does nothing yet but report Running: add your fields, children and logic."
        phases = ("- Pending: a new object, or a spec change being applied;\n- Running: reconciled;\n"
                  "- Degraded: not used yet (for when what it manages stops being ready);")
        doc = f"Reconciles a {s.kind} (describe what it does here: this is the CRD's description)."
    if s.namespaced:
        scope_note = ""
    else:
        scope_note = (f"\nA {s.kind} is cluster-scoped, so it owns only cluster-scoped kinds (`startkind` refuses "
                      "namespaced\n--owns kinds: their objects need a namespace). To manage objects inside a "
                      "namespace, add a field\nnaming it to the spec and put them there (see "
                      "reconcilers/kinds/tenant.py), or make the kind namespaced.\n")
    fields = ""
    if workloads:
        fields += _WORKLOAD_FIELDS
    if any(o.kind == "Deployment" for o in workloads):
        fields += _DEADLINE_FIELD
    if _has_port(s):
        service = any((o.group, o.kind) == ("", "Service") for o in s.owns)
        fields += _PORT_FIELD.replace("$and_service", " and the Service exposes" if service else "")
    if workloads:
        columns = ('        PrinterColumn("Ready", ".status.readyReplicas", type="integer", '
                   'description="Ready pods"),\n'
                   '        PrinterColumn("Replicas", ".spec.replicas", type="integer"),\n'
                   '        PrinterColumn("Image", ".spec.image", priority=1),\n')
    else:
        columns = "        PrinterColumn(\"Ready\", '.status.conditions[?(@.type==\"Ready\")].status'),\n"
    summary = textwrap.fill(summary + " Its phase says where it stands:", width=112)
    return _KIND_TEMPLATE.substitute(
        kind=s.kind, lower=lower, group=s.group, version=s.version, package=s.package, const=const,
        scope="namespaced" if s.namespaced else "cluster-scoped", summary=summary, phases=phases,
        scope_note=scope_note, resources="\n".join(resources), fields=fields,
        labels_target="the objects it creates" if s.owns else "what it creates (your children)",
        status_model=_STATUS_MODEL.substitute(kind=s.kind) if workloads else "\n",
        in_namespace=", in its namespace" if s.namespaced else "",
        namespace_field=' "namespace": obj["metadata"]["namespace"],' if s.namespaced else "",
        manifests=_child_functions(s), doc=doc,
        status_decl=f"    status_model = {s.kind}Status\n" if workloads else "",
        owns_tuple="".join(f"{o.const}, " for o in s.owns).rstrip(" ") if len(s.owns) == 1
        else ", ".join(o.const for o in s.owns),
        short=_short_name(s.kind), columns=columns,
        poll=("    #: how often a rollout in progress is looked at without an event from a child\n"
              "    poll_seconds = 10.0\n") if workloads else "",
        reconcile=_reconcile_body(s),
        failed=("the Deployment's rollout failed (no progress for spec.progressDeadlineSeconds; automatic\n"
                "  rollback acts on it), or\n  " if any(o.kind == "Deployment" for o in workloads) else ""),
        rollout_import=("from reconcilers.core.rollout import rollout_status\n" if len(workloads) == 1
                        else "from reconcilers.core.rollout import rollout_status, worst\n" if workloads else ""),
    )


def _short_name(kind: str) -> str:
    caps = "".join(c for c in kind if c.isupper()).lower()
    return caps if len(caps) >= 2 else kind[:2].lower()


_TEST_TEMPLATE = Template('''\
"""Tests of the $kind kind against an embedded kubesim (the opsconsole pytest plugin): `pytest $package`."""
# ruff: noqa: ANN001, ANN201 (pytest fixtures are not annotated)

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from $package.kind import ${kind}Reconciler

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "$lower.yaml"


@pytest.fixture(scope="session")
def opsconsole_kinds():
    """The kinds the plugin installs (their generated CRDs) and reconciles."""
    return [${kind}Reconciler]


def sample(name: str | None = None, **spec) -> dict:
    """The sample $kind, renamed and with some spec fields changed."""
    obj = yaml.safe_load(SAMPLE.read_text())
    obj["spec"].update(spec)
    if name:
        obj["metadata"]["name"] = name
    return obj


def test_the_sample_reaches_running_with_its_children(reconcile_until):
    outcome = reconcile_until(sample(), "Running")
    assert outcome.conditions["Ready"]["status"] == "True"
$children_asserts

def test_an_invalid_spec_is_failed_with_invalid_spec(reconcile_once):
    outcome = reconcile_once(sample("$lower-invalid", labels={"not a label": "x"}))
    assert outcome.phase == "Failed"
    assert outcome.status["reason"] == "InvalidSpec"
    assert "spec.labels" in outcome.status["message"]
''')


_BROKEN_IMAGE_TESTS = Template('''

#: kubesim never pulls a tag containing "broken": its pods wait in ErrImagePull / ImagePullBackOff
BROKEN_IMAGE = "$image-broken"
AUTO_ROLLBACK = {"opsconsole.io/auto-rollback": "true"}


def change_image(kube_api, obj: dict, image: str) -> None:
    """A spec change, as `kubectl edit` makes it: the image only."""
    meta = obj["metadata"]
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        "$group", "$version", meta["namespace"], "$plural", meta["name"], {"spec": {"image": image}})


def pods_waiting_on_the_image(kube_api, namespace: str) -> list[str]:
    """The pods whose container waits for an image that cannot be pulled."""
    pods = client.CoreV1Api(kube_api).list_namespaced_pod(namespace).items
    return [pod.metadata.name for pod in pods for status in pod.status.container_statuses or []
            if status.state.waiting and status.state.waiting.reason in ("ErrImagePull", "ImagePullBackOff")]


def test_a_broken_image_is_not_reported_ready_and_fails_at_its_progress_deadline(reconcile_once, reconcile_until,
                                                                                 kube_api):
    obj = sample("$lower-broken", progressDeadlineSeconds=2)
    running = reconcile_until(obj, "Running")
    namespace = running.obj["metadata"]["namespace"]
    change_image(kube_api, running.obj, BROKEN_IMAGE)
    # the new pod cannot start while the old ones still serve: ready replicas alone would say Running
    for _ in range(500):
        if pods_waiting_on_the_image(kube_api, namespace):
            break
        assert reconcile_once(obj).phase == "Pending"
    else:
        raise AssertionError("no pod waits on the broken image")
    outcome = reconcile_once(obj)
    assert outcome.phase == "Pending" and outcome.status["readyReplicas"] < sample()["spec"]["replicas"]
    failed = reconcile_until(obj, "Failed", timeout=20)
    assert failed.status["reason"] == "ProgressDeadlineExceeded"


def test_a_broken_image_is_rolled_back_when_automatic_rollback_is_on(opsconsole_engine, kube_api, kube_namespace):
    obj = sample("$lower-rollback", progressDeadlineSeconds=2)
    obj["metadata"].update(namespace=kube_namespace, annotations=AUTO_ROLLBACK)
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object("$group", "$version", kube_namespace,
                                                                      "$plural", obj)
    opsconsole_engine.wait_for_phase(obj, "Running")
    change_image(kube_api, obj, BROKEN_IMAGE)
    history = opsconsole_engine.history(obj, wait_for="rollback.succeeded", timeout=60)
    live = opsconsole_engine.wait_for_phase(obj, "Running")
    assert live["spec"]["image"] == sample()["spec"]["image"]  # the last good spec, written back
    assert live["metadata"]["generation"] == 3  # 1: created, 2: the broken image, 3: the rollback
    # the broken generation was never reported ready
    assert not [t for t in history["transitions"] if t["generation"] == 2 and t["to_phase"] == "Running"]
    started = next(h for h in history["healing"] if h["action"] == "rollback.started")
    assert (started["generation"], started["target_generation"]) == (2, 1)
''')


def render_test(s: Scaffold) -> str:
    kinds = sorted(o.kind for o in s.owns)
    asserts = f"    assert sorted(c[\"kind\"] for c in outcome.children) == {json.dumps(kinds)}\n"
    if len(asserts) > 110:
        items = textwrap.fill(", ".join(json.dumps(k) for k in kinds), width=100, initial_indent=" " * 8,
                              subsequent_indent=" " * 8)
        asserts = f"    assert sorted(c[\"kind\"] for c in outcome.children) == [\n{items},\n    ]\n"
    for o in s.owns:
        if o.workload:
            asserts += (f'    {o.name} = next(c for c in outcome.children if c["kind"] == "{o.kind}")\n'
                        f'    assert {o.name}["spec"]["replicas"] == sample()["spec"]["replicas"]\n')
    if any(o.workload for o in s.owns):
        asserts += '    assert outcome.status["readyReplicas"] == sample()["spec"]["replicas"]\n'
    text = _TEST_TEMPLATE.substitute(kind=s.kind, lower=s.kind.lower(), package=s.package, children_asserts=asserts)
    if any(o.kind == "Deployment" for o in s.owns):
        # a StatefulSet has no progress deadline, and Kubernetes does not replace its broken pod after a
        # rollback by itself (a known StatefulSet limitation): these tests are for Deployments
        text = text.replace("import yaml\n", "import yaml\nfrom kubernetes import client\n", 1)
        text += _BROKEN_IMAGE_TESTS.substitute(image=DEFAULT_IMAGE, lower=s.kind.lower(), group=s.group,
                                               version=s.version, plural=s.plural)
    return text
