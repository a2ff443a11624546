"""The health tree of a resource, read live from the Kubernetes API, and the one-object reads of the generic object
page.

The tree: the resource → the objects it owns by controller ownerReference (the kinds its reconciler `owns`) →
their descendants (a Deployment's ReplicaSets, their Pods), each with a kstatus-like health: `Current`,
`InProgress` or `Failed` (see `object_health`), a ready count and, for a Pod, the waiting reason of a container.

Cost is bounded: ONE LIST per kind in the resource's namespace (its `owns` kinds, plus ReplicaSets and Pods when
it owns Deployments), never a GET per object; the ownerReferences are followed by uid within the listed objects.
Lists are cached for `CACHE_SECONDS` per (namespace, kind) in this process, so a page's live refresh or several
viewers do not multiply the reads. A failing API gives back what could be read and a message, never an exception.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.core.rollout import COMPLETE, rollout_status
from reconcilers.core.rollout import FAILED as FAILED_ROLLOUT
from reconcilers.engine import apiclient, kube, registry
from reconcilers.models import Resource
from reconcilers.services.selectors.resources import resource_events
from reconcilers.services.selectors.scope import scope_allows
from reconcilers.services.selectors.secrets import secret_redacted

log = logging.getLogger(__name__)

CURRENT, IN_PROGRESS, FAILED = "Current", "InProgress", "Failed"
#: how long a listed (namespace, kind) is reused
CACHE_SECONDS = 5.0
#: how deep the tree goes below the resource (Deployment → ReplicaSet → Pod is 3)
MAX_DEPTH = 4
LIST_TIMEOUT = (2.0, 5.0)

DEPLOYMENT = ResourceKind("apps", "v1", "deployments", "Deployment")
REPLICASET = ResourceKind("apps", "v1", "replicasets", "ReplicaSet")
POD = ResourceKind("", "v1", "pods", "Pod")
EVENT = ResourceKind("", "v1", "events", "Event")
#: the kinds listed below an owned kind (what its controller creates)
DESCENDANTS: dict[tuple[str, str], tuple[ResourceKind, ...]] = {
    ("apps", "deployments"): (REPLICASET, POD),
    ("apps", "replicasets"): (POD,),
    ("apps", "statefulsets"): (POD,),
    ("apps", "daemonsets"): (POD,),
    ("batch", "jobs"): (POD,),
}
#: container waiting reasons that will not clear by themselves (the Pod is Failed until its spec changes)
FAILED_WAITING = frozenset({
    "ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})


# -- health ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    """An object's health: status (Current / InProgress / Failed), a message, a ready count ("2/3 ready") and,
    for a Pod, the waiting reason of its first waiting container."""

    status: str
    message: str = ""
    ready: str = ""
    reason: str = ""


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict)}


def _generation_behind(obj: dict[str, Any]) -> bool:
    generation = (obj.get("metadata") or {}).get("generation")
    observed = (obj.get("status") or {}).get("observedGeneration")
    return generation is not None and observed is not None and int(observed) < int(generation)


def workload_health(obj: dict[str, Any]) -> Health:
    """A Deployment, StatefulSet or DaemonSet, judged by `reconcilers.core.rollout.rollout_status` (kubectl
    rollout status' rules, the judgement the kinds use): Failed when the rollout failed (a Deployment's
    ProgressDeadlineExceeded), InProgress while it progresses, Current once complete; the count is the ready
    replicas of the current spec ("1/3 ready" while old replicas still serve)."""
    rollout = rollout_status(obj)
    status = {COMPLETE: CURRENT, FAILED_ROLLOUT: FAILED}.get(rollout.state, IN_PROGRESS)
    reason = rollout.reason if rollout.state != COMPLETE else ""
    return Health(status, rollout.message, rollout.count, reason)


def replicaset_health(obj: dict[str, Any]) -> Health:
    """A ReplicaSet: Failed on ReplicaFailure, InProgress until its replicas are ready and available."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    ready = int(status.get("readyReplicas") or 0)
    count = f"{ready}/{desired} ready"
    failure = _conditions(obj).get("ReplicaFailure") or {}
    if failure.get("status") == "True":
        return Health(FAILED, failure.get("message") or "replica failure", count, failure.get("reason", ""))
    if _generation_behind(obj):
        return Health(IN_PROGRESS, "the new generation is not observed yet", count)
    if ready < desired or int(status.get("availableReplicas") or 0) < desired:
        return Health(IN_PROGRESS, f"{ready} of {desired} replicas ready", count)
    return Health(CURRENT, "all replicas ready", count)


def _waiting(statuses: list[dict[str, Any]]) -> tuple[str, str]:
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return waiting["reason"], waiting.get("message") or ""
    return "", ""


def pod_health(obj: dict[str, Any]) -> Health:
    """A Pod: Current when Succeeded, or Running with the Ready condition True; Failed when its phase is Failed or
    a container waits for a reason that will not clear by itself (ImagePullBackOff, ErrImagePull,
    CrashLoopBackOff, …: FAILED_WAITING); InProgress otherwise (scheduling, pulling, starting, not ready)."""
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    init = [c for c in status.get("initContainerStatuses") or [] if isinstance(c, dict)]
    total = len(containers) or len((obj.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in containers if c.get("ready"))
    count = f"{ready}/{total} ready"
    reason, message = _waiting(init + containers)
    if phase == "Succeeded":
        return Health(CURRENT, "completed", count)
    if phase == "Failed":
        return Health(FAILED, status.get("message") or "the pod failed", count, reason or status.get("reason", ""))
    if reason in FAILED_WAITING:
        return Health(FAILED, message or f"a container is waiting: {reason}", count, reason)
    ready_cond = _conditions(obj).get("Ready") or {}
    if phase == "Running" and ready_cond.get("status") == "True":
        return Health(CURRENT, "running and ready", count)
    if reason:
        return Health(IN_PROGRESS, message or f"a container is waiting: {reason}", count, reason)
    return Health(IN_PROGRESS, f"{phase}: {ready} of {total} containers ready", count)


def service_health(obj: dict[str, Any]) -> Health:
    """A Service: InProgress while a LoadBalancer has no ingress yet, Current otherwise."""
    if (obj.get("spec") or {}).get("type") == "LoadBalancer":
        if not ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress"):
            return Health(IN_PROGRESS, "waiting for the load balancer's address")
    return Health(CURRENT, "service ready")


def generic_health(obj: dict[str, Any]) -> Health:
    """Any other object, by kstatus's generic rules: InProgress while the generation is not observed, Failed when
    Stalled is True, InProgress when Reconciling is True or Ready is False, Current otherwise."""
    conds = _conditions(obj)
    if (conds.get("Stalled") or {}).get("status") == "True":
        c = conds["Stalled"]
        return Health(FAILED, c.get("message") or "stalled", reason=c.get("reason", ""))
    if _generation_behind(obj):
        return Health(IN_PROGRESS, "the new generation is not observed yet")
    if (conds.get("Reconciling") or {}).get("status") == "True":
        c = conds["Reconciling"]
        return Health(IN_PROGRESS, c.get("message") or "reconciling", reason=c.get("reason", ""))
    ready = conds.get("Ready") or {}
    if ready.get("status") == "False":
        return Health(IN_PROGRESS, ready.get("message") or "not ready", reason=ready.get("reason", ""))
    phase = (obj.get("status") or {}).get("phase")
    if phase in ("Failed",):
        return Health(FAILED, f"phase {phase}")
    if phase in ("Pending", "Terminating"):
        return Health(IN_PROGRESS, f"phase {phase}")
    return Health(CURRENT, "")


_BY_KIND = {
    ("apps", "Deployment"): workload_health,
    ("apps", "StatefulSet"): workload_health,
    ("apps", "DaemonSet"): workload_health,
    ("apps", "ReplicaSet"): replicaset_health,
    ("", "Pod"): pod_health,
    ("", "Service"): service_health,
}


def object_health(obj: dict[str, Any]) -> Health:
    """The kstatus-like health of any object (by its apiVersion's group and kind)."""
    api_version = obj.get("apiVersion") or ""
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return _BY_KIND.get((group, obj.get("kind") or ""), generic_health)(obj)


# -- the cached lists -----------------------------------------------------------------------------------

_cache: dict[tuple[str, str, str], tuple[float, list[dict[str, Any]]]] = {}
_cache_lock = threading.Lock()


def cache_clear() -> None:
    """Forget every cached list (tests)."""
    with _cache_lock:
        _cache.clear()


def _list(api: Any, kind: ResourceKind, namespace: str) -> list[dict[str, Any]]:
    """One kind's objects in the namespace ('' for a cluster-scoped kind) of the API server `api` reaches, from
    the cache when fresh."""
    ns = namespace if kind.namespaced else ""
    server = str(getattr(getattr(api, "configuration", None), "host", ""))  # one cluster's objects per entry
    key = (server, ns, kind.api_version, kind.plural)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit and hit[0] > now:
            return hit[1]
    items = kube.list_objects(api, kind, ns or None, timeout=LIST_TIMEOUT).items
    with _cache_lock:
        _cache[key] = (now + CACHE_SECONDS, items)
        for stale in [k for k, (until, _) in _cache.items() if until <= now]:
            del _cache[stale]
    return items


# -- the tree -------------------------------------------------------------------------------------------


@dataclass
class TreeNode:
    """One object of the tree, its health and its children (by controller ownerReference)."""

    group: str
    version: str
    plural: str
    kind: str
    namespace: str
    name: str
    uid: str
    health: Health
    depth: int = 0
    children: list[TreeNode] = field(default_factory=list)

    @property
    def group_path(self) -> str:
        """The group as the object page's URL spells it ('core' for the core group)."""
        return self.group or "core"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def as_dict(self) -> dict[str, Any]:
        """The node as JSON (the API's shape)."""
        return {"apiVersion": self.api_version, "kind": self.kind, "plural": self.plural,
                "namespace": self.namespace, "name": self.name, "uid": self.uid,
                "health": {"status": self.health.status, "message": self.health.message,
                           "ready": self.health.ready, "reason": self.health.reason},
                "children": [c.as_dict() for c in self.children]}


@dataclass
class HealthTree:
    """The resource's node (its children below it), the flattened rows for a table, and an error message when
    the API did not answer (what could be read is still there)."""

    root: TreeNode
    error: str = ""

    def rows(self) -> list[TreeNode]:
        """Every node depth-first (each with its depth), the resource first."""
        out: list[TreeNode] = []

        def walk(node: TreeNode) -> None:
            out.append(node)
            for child in node.children:
                walk(child)

        walk(self.root)
        return out

    def counts(self) -> dict[str, int]:
        """How many objects below the resource are in each health status."""
        out = {CURRENT: 0, IN_PROGRESS: 0, FAILED: 0}
        for node in self.rows()[1:]:
            out[node.health.status] = out.get(node.health.status, 0) + 1
        return out


def controller_uid(obj: dict[str, Any]) -> str:
    """The uid of the object's controller owner ('' when none)."""
    refs = [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if isinstance(r, dict)]
    ref = next((r for r in refs if r.get("controller")), None)
    return (ref or {}).get("uid", "")


def _node(kind: ResourceKind, obj: dict[str, Any], depth: int) -> TreeNode:
    meta = obj.get("metadata") or {}
    return TreeNode(kind.group, kind.version, kind.plural, kind.kind, meta.get("namespace", ""),
                    meta.get("name", ""), meta.get("uid", ""), object_health(obj), depth)


def _resource_node(resource: Resource) -> TreeNode:
    obj = {"apiVersion": f"{resource.group}/{resource.version}" if resource.group else resource.version,
           "kind": resource.kind, "metadata": {"generation": resource.generation}, "status": resource.status or {}}
    if resource.observed_generation is not None:
        obj["status"] = {**obj["status"], "observedGeneration": resource.observed_generation}
    return TreeNode(resource.group, resource.version, resource.plural, resource.kind, resource.namespace,
                    resource.name, resource.uid, generic_health(obj))


def tree_kinds(owns: tuple[ResourceKind, ...] | list[ResourceKind]) -> list[ResourceKind]:
    """The kinds listed for a reconciler that owns `owns`: those, then their descendants' kinds, each once."""
    out: list[ResourceKind] = []
    for kind in [*owns, *(d for o in owns for d in DESCENDANTS.get((o.group, o.plural), ()))]:
        if all((k.group, k.plural) != (kind.group, kind.plural) for k in out):
            out.append(kind)
    return out


def resource_tree(resource: Resource, *, namespaces: frozenset[str] | None = None, api: Any = None) -> HealthTree:
    """The resource's health tree, read live (one cached LIST per kind; see the module docstring); only objects in
    `namespaces` ('' for cluster-scoped ones) when given: a cluster-scoped resource (a Tenant) may own objects in
    namespaces its viewer may not see."""
    root = _resource_node(resource)
    try:
        rec = registry.for_key(resource.key)
    except (registry.UnknownKind, ValueError):
        return HealthTree(root, "this kind is not registered: its children are unknown")
    owned = {(k.group, k.plural) for k in rec.owns}
    by_owner: dict[str, list[tuple[ResourceKind, dict[str, Any]]]] = {}
    error = ""
    try:
        api = api or apiclient.get_api_client(resource.cluster)
        for kind in tree_kinds(rec.owns):
            for obj in _list(api, kind, resource.namespace):
                owner = controller_uid(obj)
                if owner and (owner != resource.uid or (kind.group, kind.plural) in owned):
                    by_owner.setdefault(owner, []).append((kind, obj))
    except Exception as exc:  # a read for display: report, never fail the page
        log.info("health tree of %s not read: %s", resource, exc)
        error = f"the Kubernetes API did not answer: {exc}"
    seen = {resource.uid}

    def attach(node: TreeNode) -> None:
        if node.depth >= MAX_DEPTH:
            return
        for kind, obj in sorted(by_owner.get(node.uid, []), key=lambda ko: (ko[0].kind, _name(ko[1]))):
            child = _node(kind, obj, node.depth + 1)
            if not scope_allows(namespaces, resource.cluster, child.namespace):
                continue
            if child.uid and child.uid not in seen:
                seen.add(child.uid)
                node.children.append(child)
                attach(child)

    attach(root)
    return HealthTree(root, error)


def _name(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name", "")


# -- one object (the generic object page) ---------------------------------------------------------------

#: how many owners the owner chain follows at most
MAX_OWNERS = 5


def viewable_kinds() -> list[ResourceKind]:
    """The kinds the object page may show: every registered kind's `owns`, their descendants (ReplicaSets, Pods)
    and Events. Nothing else (no arbitrary kinds): the console's identity may read more than a user should see
    through the console. Secrets are viewable only where a registered kind owns them, and then only in a
    resource's owner chain and redacted (`object_page`)."""
    owns = [k for rec in registry.registered() for k in rec.owns]
    return tree_kinds([*owns, REPLICASET, POD, EVENT])


def viewable_kind(group: str, version: str, plural: str) -> ResourceKind | None:
    """The viewable kind at that address ('core' or '' for the core group), or None."""
    group = "" if group == "core" else group
    return next((k for k in viewable_kinds() if (k.group, k.version, k.plural) == (group, version, plural)), None)


@dataclass
class OwnerLink:
    """One owner in an object's owner chain: a mirrored resource (`resource_id`), a viewable object (`kind`
    set) or an object the console does not show (neither)."""

    api_version: str
    kind_name: str
    name: str
    namespace: str
    uid: str
    kind: ResourceKind | None = None
    resource_id: int | None = None

    @property
    def group_path(self) -> str:
        return (self.kind.group or "core") if self.kind else ""


@dataclass
class ObjectPage:
    """What the object page shows: the object (managedFields omitted), its owner chain (nearest owner first),
    its Events (live, then archived ones not live any more), the mirrored resource it belongs to, and an
    error message when a read failed."""

    obj: dict[str, Any]
    owners: list[OwnerLink] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    resource: Resource | None = None
    error: str = ""


class ObjectMissing(LookupError):
    """The object is not in the cluster."""


def _kind_by_type(api_version: str, kind_name: str) -> ResourceKind | None:
    return next((k for k in viewable_kinds() if (k.api_version, k.kind) == (api_version, kind_name)), None)


def _owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """An object's ownerReferences; an Event's is the object it is about (`involvedObject`)."""
    meta = obj.get("metadata") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
    involved = obj.get("involvedObject")
    if not refs and obj.get("kind") == EVENT.kind and isinstance(involved, dict):
        refs = [{**involved, "controller": True}]
    return refs


def _owner_chain(api: Any, obj: dict[str, Any]) -> tuple[list[OwnerLink], Resource | None]:
    chain: list[OwnerLink] = []
    current = obj
    for _ in range(MAX_OWNERS):
        meta = current.get("metadata") or {}
        refs = _owner_refs(current)
        ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        if not ref:
            break
        namespace = meta.get("namespace", "")
        link = OwnerLink(ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""), namespace,
                         ref.get("uid", ""))
        chain.append(link)
        mirrored = Resource.objects.filter(uid=link.uid, deleted=False).first() if link.uid else None
        if mirrored is not None:
            link.resource_id, link.namespace = mirrored.pk, mirrored.namespace
            return chain, mirrored
        link.kind = _kind_by_type(link.api_version, link.kind_name)
        if link.kind is None:
            break
        link.namespace = namespace if link.kind.namespaced else ""
        owner = kube.get_object(api, link.kind, link.namespace or None, link.name, timeout=LIST_TIMEOUT)
        if owner is None or (owner.get("metadata") or {}).get("uid") != link.uid:
            break
        current = owner
    return chain, None


def _live_event(e: dict[str, Any]) -> dict[str, Any]:
    meta = e.get("metadata") or {}
    source = e.get("source") or {}
    return {"name": meta.get("name", ""), "type": e.get("type", ""), "reason": e.get("reason", ""),
            "message": e.get("message", ""), "count": e.get("count") or 1,
            "last_timestamp": e.get("lastTimestamp") or e.get("eventTime") or meta.get("creationTimestamp") or None,
            "source": source.get("component", "") if isinstance(source, dict) else str(source), "live": True}


def object_page(kind: ResourceKind, namespace: str, name: str, *, api: Any = None,
                namespaces: frozenset[str] | None = None) -> ObjectPage:
    """One object for its page: a GET, a GET per owner up to the mirrored resource (at most MAX_OWNERS), a LIST
    of its Events (fieldSelector involvedObject.uid), and the archived Events of that resource. Only an object in
    the owner chain of a mirrored resource within `namespaces` (None: any) is shown: any other object, one
    not in the cluster included, is ObjectMissing (the console's identity may read objects no registered resource
    owns). A Secret is shown redacted (`secret_redacted`). The API's errors are raised (the page says so)."""
    api = api or apiclient.get_api_client()
    ns = namespace if kind.namespaced else ""
    missing = ObjectMissing(f"{kind.kind} {ns + '/' if ns else ''}{name} is not in the cluster")
    obj = kube.get_object(api, kind, ns or None, name, timeout=LIST_TIMEOUT)
    if obj is None:
        raise missing
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    (obj.get("metadata") or {}).pop("managedFields", None)
    page = ObjectPage(secret_redacted(obj))
    page.owners, page.resource = _owner_chain(api, obj)
    if page.resource is None or not scope_allows(namespaces, page.resource.cluster, page.resource.namespace):
        raise missing
    uid = (obj.get("metadata") or {}).get("uid", "")
    try:
        if uid:
            listed = kube.list_objects(api, EVENT, ns or None, field_selector=f"involvedObject.uid={uid}",
                                       timeout=LIST_TIMEOUT).items
            page.events = sorted((_live_event(e) for e in listed), key=lambda e: str(e["last_timestamp"] or ""),
                                 reverse=True)
    except Exception as exc:  # the object is shown; what could not be read is said
        log.info("object page of %s %s/%s partly read: %s", kind.kind, ns, name, exc)
        page.error = f"the Kubernetes API did not answer: {exc}"
    if page.resource is not None:
        live_names = {e["name"] for e in page.events}
        for e in resource_events(page.resource, limit=200):
            if (e["involved_kind"], e["involved_namespace"] or "", e["involved_name"]) == (kind.kind, ns, name) \
                    and e["name"] not in live_names:
                page.events.append({**e, "live": False})
    return page
