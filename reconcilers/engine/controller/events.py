"""What an informer reports, and which of its events lead to a reconcile (pure functions, no I/O).

For a reconciled (primary) kind, controller-runtime's predicates: an object that appears or disappears,
a generation change (spec), a change of deletionTimestamp or finalizers, and a change of the manual
reconcile annotation or of self-healing's annotations (suspended, suspended-until, auto-rollback) enqueue its
key; an update of status only (or of nothing but resourceVersion) does not.
For an owned (child) kind, any real change of the child enqueues the owner named by its controller
ownerReference (controller-runtime's `Owns()`), so that status changes of a Deployment reach its Memcached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join
from reconcilers.core.meta import (
    AUTO_ROLLBACK,
    FLUX_REQUESTED_AT,
    RECONCILE_REQUESTED_AT,
    SUSPENDED,
    SUSPENDED_UNTIL,
    controller_ref,
)
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.controller.slim import slim

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

#: metadata fields that change on every write and say nothing about the object
VOLATILE_METADATA = ("resourceVersion", "managedFields")


@dataclass(frozen=True)
class InformerEvent:
    """One change seen by an informer: ADDED, MODIFIED (with the previous state) or DELETED (last state)."""

    type: str
    kind: ResourceKind
    obj: dict[str, Any]
    old: dict[str, Any] | None = None
    cluster: str = DEFAULT_CLUSTER  # the cluster the informer watches
    #: a DELETED that a re-list made up for an object it no longer returned (deleted, or out of the informer's label
    #: selector), not one the watch reported
    relisted: bool = False

    @property
    def key(self) -> str:
        """The reconcile key of the object (its cluster's prefix outside the default cluster)."""
        return object_key(self.kind, self.obj, self.cluster)

    @property
    def uid(self) -> str:
        return str(_meta(self.obj).get("uid") or "")


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def object_key(kind: ResourceKind, obj: dict[str, Any], cluster: str = DEFAULT_CLUSTER) -> str:
    """The reconcile key of one object of `kind` in `cluster`: `group/version/plural/namespace/name`, with the
    cluster's name in front outside the default cluster (`reconcilers.core.clusters`)."""
    meta = _meta(obj)
    return key_join(cluster, kind.request(meta.get("namespace") or "", meta["name"]).key())


def annotation(obj: dict[str, Any] | None, name: str) -> str | None:
    """One annotation's value, or None."""
    return (_meta(obj).get("annotations") or {}).get(name)


def primary_wants_reconcile(event: InformerEvent) -> bool:
    """Whether an event of a reconciled kind enqueues its key."""
    if event.type in (ADDED, DELETED) or event.old is None:
        return True
    new, old = _meta(event.obj), _meta(event.old)
    return (
        new.get("generation") != old.get("generation")
        or new.get("deletionTimestamp") != old.get("deletionTimestamp")
        or (new.get("finalizers") or []) != (old.get("finalizers") or [])
        # a reconcile asked through the annotation, opsconsole's or Flux's (the runner decides whether the Flux
        # spelling counts, OPSCONSOLE_FLUX_REQUESTED_AT; a reconcile it runs meanwhile is harmless)
        or any(annotation(event.obj, name) != annotation(event.old, name)
               for name in (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT, SUSPENDED, SUSPENDED_UNTIL, AUTO_ROLLBACK))
    )


def _without_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as the informer cache keeps it (`slim`: no managedFields, no last-applied annotation), without its
    resourceVersion: a change's previous state comes from that cache."""
    obj = slim(obj)
    meta = {k: v for k, v in _meta(obj).items() if k not in VOLATILE_METADATA}
    return {**obj, "metadata": meta}


def child_changed(event: InformerEvent) -> bool:
    """Whether an event of an owned kind is a real change (anything but resourceVersion, managedFields and the
    last-applied annotation, which the informer cache the previous state comes from does not keep)."""
    if event.type in (ADDED, DELETED) or event.old is None:
        return True
    return _without_volatile(event.obj) != _without_volatile(event.old)


def _ref_group(ref: dict[str, Any]) -> str:
    api_version = ref.get("apiVersion") or ""
    return api_version.rpartition("/")[0]


def controller_owner_uid(obj: dict[str, Any] | None, owners: Iterable[ResourceKind]) -> str | None:
    """The uid of `obj`'s controller ownerReference when that owner's kind is one of `owners`, else None."""
    ref = controller_ref(obj)
    if ref is None or not ref.get("uid"):
        return None
    if any(ref.get("kind") == owner.kind and _ref_group(ref) == owner.group for owner in owners):
        return str(ref["uid"])
    return None


def owner_keys(
    event: InformerEvent,
    owners: Iterable[ResourceKind],
    lookup: Callable[[ResourceKind, str], str | None],
) -> set[str]:
    """The keys of the owners to enqueue for a child's event.

    The owner is the child's controller ownerReference whose kind and API group match one of `owners`;
    its key comes from `lookup(owner_kind, uid)` (the owner informer's cache). When the cache does not know
    the uid (yet), the key is built from the reference's name and the child's namespace, as
    controller-runtime's EnqueueRequestForOwner does; a stale key costs one reconcile that finds nothing.
    On an update that moved the reference, both the old and the new owner are enqueued.
    """
    owners = list(owners)
    keys: set[str] = set()
    for obj in (event.obj, event.old):
        ref = controller_ref(obj)
        if ref is None:
            continue
        for owner in owners:
            if ref.get("kind") != owner.kind or _ref_group(ref) != owner.group:
                continue
            key = lookup(owner, str(ref.get("uid") or ""))
            if key is None and ref.get("name"):
                namespace = _meta(obj).get("namespace") or ""
                key = key_join(event.cluster, owner.request(namespace, ref["name"]).key())
            if key is not None:
                keys.add(key)
    return keys
