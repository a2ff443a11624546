"""The health tree of a resource, read live from the Kubernetes API.

The tree: the resource → the objects it owns by controller ownerReference (the kinds its reconciler `owns`) →
their descendants (a Deployment's ReplicaSets, their Pods), each with a kstatus-like health
(`object_health.object_health`).

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
from reconcilers.engine import apiclient, kube, registry
from reconcilers.models import Resource
from reconcilers.services.selectors.object_health import (
    CURRENT,
    FAILED,
    IN_PROGRESS,
    Health,
    generic_health,
    object_health,
)
from reconcilers.services.selectors.scope import scope_allows

log = logging.getLogger(__name__)

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

