"""Where an Event's involved object sits under a registered object: the references the archive resolves, and the
lineage the owner resolver caches for each object it walked (issue 38).

A `Lineage` says which registered object (by uid) an object leads up to, how many controller ownerReference hops
away it is (0: the registered object itself; 1: a child it applied, such as its Deployment), and, for an object
below a workload, the workload *revision* it belongs to (`Anchor`): the pod template of a ReplicaSet owned by a
Deployment (every Pod of that ReplicaSet inherits it), or a StatefulSet Pod's `controller-revision-hash`. Both are
fixed for the life of the object (a ReplicaSet's template is never changed in place, nor a Pod's labels by its
controller), so they are cached with the walk: `attribution` compares them, once per batch, with the workload's
current revision to decide which generation an Event is evidence about.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from reconcilers.core.meta import controller_ref

#: the label a Deployment's ReplicaSets and their Pods carry (left out when templates are compared)
POD_TEMPLATE_HASH = "pod-template-hash"
#: the label a StatefulSet puts on each Pod: the ControllerRevision the Pod was made from
CONTROLLER_REVISION_HASH = "controller-revision-hash"


@dataclass(frozen=True)
class ObjectRef:
    """An object an Event is about (its involvedObject), or an owner on the way up."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def owner(cls, reference: dict[str, Any], namespace: str) -> ObjectRef:
        """The object an ownerReference names (owners live in their child's namespace)."""
        return cls(str(reference.get("apiVersion") or ""), str(reference.get("kind") or ""), namespace,
                   str(reference.get("name") or ""), str(reference.get("uid") or ""))


@dataclass(frozen=True)
class Anchor:
    """The workload revision an object belongs to: `workload` (a Deployment or a StatefulSet) and `key`, the
    digest of its ReplicaSet's pod template or the StatefulSet Pod's controller-revision-hash."""

    workload: ObjectRef
    key: str

    @property
    def attribution(self) -> str:
        """How an Event filed through this anchor is attributed ('replicaset' or 'controllerrevision')."""
        return "replicaset" if self.workload.kind == "Deployment" else "controllerrevision"


@dataclass(frozen=True)
class Lineage:
    """Where one object sits: the registered root's uid (None: none), its hops from the root, its anchor, and the
    namespace it was found in (None: not known here; the root's is checked instead)."""

    root: str | None
    hops: int = 1
    anchor: Anchor | None = None
    namespace: str | None = None


def template_digest(template: dict[str, Any] | None) -> str:
    """A digest of a pod template without the pod-template-hash label: a ReplicaSet's template and its
    Deployment's have the same digest exactly when the Deployment controller counts that ReplicaSet as its new
    one (it compares them the same way)."""
    tmpl = json.loads(json.dumps(template or {}))
    labels = (tmpl.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH, None)
    raw = json.dumps(tmpl, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def anchor_of(ref: ObjectRef, obj: dict[str, Any] | None) -> Anchor | None:
    """The anchor `obj` (read for `ref`) is itself: a ReplicaSet controlled by a Deployment (its template), or a
    Pod controlled by a StatefulSet (its controller-revision-hash); None for anything else."""
    owner = controller_ref(obj) if obj is not None else None
    if owner is None or not owner.get("uid"):
        return None
    workload = ObjectRef.owner(owner, ref.namespace)
    if ref.kind == "ReplicaSet" and workload.kind == "Deployment":
        return Anchor(workload, template_digest(((obj or {}).get("spec") or {}).get("template")))
    if ref.kind == "Pod" and workload.kind == "StatefulSet":
        revision = str((((obj or {}).get("metadata") or {}).get("labels") or {}).get(CONTROLLER_REVISION_HASH)
                       or "")
        return Anchor(workload, revision) if revision else None
    return None


def current_revision(kind: str, workload: dict[str, Any] | None) -> str | None:
    """The revision a workload of `kind` makes now: a Deployment's template digest, a StatefulSet's
    `status.updateRevision` (None when it has none yet, or for another kind)."""
    if workload is None:
        return None
    if kind == "StatefulSet":
        return str((workload.get("status") or {}).get("updateRevision") or "") or None
    if kind == "Deployment":
        return template_digest((workload.get("spec") or {}).get("template"))
    return None
