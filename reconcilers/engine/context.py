"""The `Context` a reconciler runs with: the API client, a logger, the span, and the helpers it acts through.

- `apply_child(manifest)`: create-or-patch a child with an ownerReference to the reconciled object
  (controller=true, blockOwnerDeletion=true), as controller-runtime's CreateOrUpdate + SetControllerReference:
  a child that another controller owns is not taken over (TemporaryError: the garbage collector usually
  removes such an orphan of an earlier object of the same name); an unowned one is adopted; an owned one is
  patched only when the manifest is not already a subset of what is there (no needless writes).
- `get` / `list` / `delete` / `list_children` for any `ResourceKind`.
- `add_finalizer` / `remove_finalizer`: a JSON merge patch carrying the resourceVersion read (409 → re-read,
  retry), so a concurrent change is never overwritten; the context's `obj` follows every write.
- `event(type, reason, message)`: a core/v1 Event about the reconciled object (best effort: an Event that
  cannot be posted is logged, never fails the reconcile).
- `condition(...)`: builds a `Condition` (the runner stamps lastTransitionTime and observedGeneration).

All API calls go through `reconcilers.engine.kube`.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import UTC, datetime
from typing import Any

from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.types import Condition, ConditionStatus, Request, TemporaryError
from reconcilers.engine import kube

REPORTING_COMPONENT = "opsconsole-controller"
_CONFLICT_ATTEMPTS = 5
_IGNORED_TOP_LEVEL = {"apiVersion", "kind", "status"}

log = logging.getLogger(__name__)


def now_rfc3339() -> str:
    """The current time as Kubernetes writes timestamps (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_subset(desired: Any, actual: Any) -> bool:
    """True when every field of `desired` has the same value in `actual` (dicts: a subset of keys; lists:
    the same length, item by item; anything else: equal). Server-defaulted extras in `actual` are ignored."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(k in actual and is_subset(v, actual[k]) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(actual, list) and len(desired) == len(actual)
                and all(is_subset(d, a) for d, a in zip(desired, actual, strict=True)))
    if isinstance(desired, (int, float)) and isinstance(actual, (int, float)) and not isinstance(desired, bool):
        return desired == actual and not isinstance(actual, bool)
    return desired == actual


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with controller=true of an object, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


class EngineContext:
    """The Context implementation (see `reconcilers.core.reconciler.Context`) for one reconcile of one object."""

    def __init__(
        self,
        reconciler: Reconciler,
        obj: dict[str, Any],
        api_client: Any,
        *,
        request: Request | None = None,
        log: logging.Logger | None = None,
        span: Any = None,
    ) -> None:
        self.reconciler = reconciler
        self.kind: ResourceKind = reconciler.resource
        self.obj = obj
        meta = obj.get("metadata") or {}
        self.request = request or self.kind.request(meta.get("namespace") or "", meta["name"])
        self.api_client = api_client
        self.log = log or logging.getLogger(f"reconcilers.{reconciler.name}")
        self.span = span
        self.events_posted: list[dict[str, Any]] = []
        self.children_written = 0

    # -- the reconciled object -------------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        """The reconciled object's namespace ('' when cluster-scoped)."""
        return self.request.namespace

    def owner_reference(self) -> dict[str, Any]:
        """The controller ownerReference children of the reconciled object carry."""
        meta = self.obj["metadata"]
        return {
            "apiVersion": self.kind.api_version,
            "kind": self.kind.kind,
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def refresh(self) -> dict[str, Any] | None:
        """Re-read the reconciled object (None when it is gone); `obj` follows."""
        fresh = kube.get_object(self.api_client, self.kind, self.namespace or None, self.request.name)
        if fresh is not None:
            self.obj = fresh
        return fresh

    # -- reading and deleting ------------------------------------------------------------------------------

    def get(self, kind: ResourceKind, namespace: str, name: str) -> dict[str, Any] | None:
        """Read one object, or None when it does not exist."""
        return kube.get_object(self.api_client, kind, namespace or None, name)

    def list(self, kind: ResourceKind, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        """The objects of `kind` in `namespace` (all namespaces when None or '') matching the selectors."""
        return kube.list_objects(self.api_client, kind, namespace or None, label_selector=label_selector,
                                 field_selector=field_selector).items

    def delete(self, kind: ResourceKind, namespace: str, name: str) -> bool:
        """Delete one object (background propagation); False when it was already gone."""
        return kube.delete_object(self.api_client, kind, namespace or None, name)

    def list_children(self, kind: ResourceKind) -> list[dict[str, Any]]:
        """The objects of `kind` whose controller ownerReference is the reconciled object (by uid)."""
        uid = self.obj["metadata"]["uid"]
        where = self.namespace if (kind.namespaced and self.kind.namespaced) else None
        return [o for o in self.list(kind, where) if (controller_of(o) or {}).get("uid") == uid]

    # -- children ------------------------------------------------------------------------------------

    def resolve(self, api_version: str, kind_name: str) -> ResourceKind:
        """The ResourceKind of `apiVersion` + `kind`: the reconciler's declared children first, then discovery."""
        for kind in (*self.reconciler.owns, self.kind):
            if kind.api_version == api_version and kind.kind == kind_name:
                return kind
        found = kube.kind_for(self.api_client, api_version, kind_name)
        if found is None:
            raise LookupError(f"the API serves no {kind_name} in {api_version}")
        return found

    def apply_child(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create the child, or patch it to match `manifest`, with a controller ownerReference to the
        reconciled object. Returns the child as the API has it afterwards."""
        kind = self.resolve(manifest["apiVersion"], manifest["kind"])
        desired = _with_namespace(manifest, kind, self.namespace)
        meta = desired["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        ref = self.owner_reference()
        meta["ownerReferences"] = [ref]
        # an object never reconciled (no observedGeneration) most likely has no children yet: create first and
        # look only when that meets 409 AlreadyExists (one round trip instead of two for a new object)
        create_first = (self.obj.get("status") or {}).get("observedGeneration") is None
        for _attempt in range(_CONFLICT_ATTEMPTS):
            existing = None if create_first else kube.get_object(self.api_client, kind, namespace or None, name)
            create_first = False
            if existing is None:
                try:
                    created = kube.create_object(self.api_client, kind, desired, namespace or None)
                except kube.ApiException as exc:
                    if exc.status == 409:  # created meanwhile: look again
                        continue
                    raise
                self.children_written += 1
                return created
            owner = controller_of(existing)
            if owner is not None and owner.get("uid") != ref["uid"]:
                raise TemporaryError(
                    f"{kind.kind} {namespace + '/' if namespace else ''}{name} is controlled by "
                    f"{owner.get('kind')} {owner.get('name')} (uid {owner.get('uid')})",
                    delay=2.0, reason="ChildOwnedElsewhere")
            patch = _child_patch(desired, existing, ref)
            if patch is None:
                return existing
            patch.setdefault("metadata", {})["resourceVersion"] = existing["metadata"]["resourceVersion"]
            try:
                patched = kube.patch_object(self.api_client, kind, namespace or None, name, patch)
            except kube.ApiException as exc:
                if exc.status in (404, 409):  # deleted or changed meanwhile: look again
                    continue
                raise
            self.children_written += 1
            return patched
        raise TemporaryError(f"{kind.kind} {name} kept changing while being applied", delay=1.0,
                             reason="ChildConflict")

    # -- finalizers -----------------------------------------------------------------------------------

    def add_finalizer(self, name: str) -> None:
        """Add a finalizer to the reconciled object (no-op when present)."""
        self._change_finalizers(lambda fins: fins if name in fins else [*fins, name])

    def remove_finalizer(self, name: str) -> None:
        """Remove a finalizer from the reconciled object (no-op when absent or when the object is gone)."""
        self._change_finalizers(lambda fins: [f for f in fins if f != name])

    def _change_finalizers(self, change: Any) -> None:
        for _attempt in range(_CONFLICT_ATTEMPTS):
            meta = self.obj["metadata"]
            current = list(meta.get("finalizers") or [])
            wanted = change(current)
            if wanted == current:
                return
            patch = {"metadata": {"finalizers": wanted, "resourceVersion": meta["resourceVersion"]}}
            try:
                result = kube.patch_object(self.api_client, self.kind, self.namespace or None, self.request.name, patch)
            except kube.ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status == 409:
                    if self.refresh() is None:
                        return
                    continue
                raise
            # the last finalizer of an object being deleted: the API answers with the object as it went
            self.obj = result if isinstance(result, dict) and result.get("metadata") else self.obj
            return
        raise TemporaryError("the object kept changing while its finalizers were updated", delay=1.0,
                             reason="FinalizerConflict")

    # -- events and conditions -------------------------------------------------------------------------

    def event(self, type_: str, reason: str, message: str) -> None:
        """Post a core/v1 Event about the reconciled object (type_ Normal or Warning); best effort."""
        if type_ not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type_!r}")
        meta = self.obj.get("metadata") or {}
        stamp = now_rfc3339()
        where = self.namespace or "default"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": where},
            "involvedObject": {
                "apiVersion": self.kind.api_version,
                "kind": self.kind.kind,
                "name": meta.get("name"),
                "namespace": self.namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": REPORTING_COMPONENT, "host": socket.gethostname()},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": REPORTING_COMPONENT,
            "reportingInstance": f"{socket.gethostname()}-{os.getpid()}",
        }
        try:
            posted = kube.create_object(self.api_client, _EVENT, body, body["metadata"]["namespace"])
        except Exception as exc:  # an Event is a courtesy: the database is the record
            self.log.warning("could not post event %s for %s: %s", reason, self.request, exc)
            return
        self.events_posted.append(posted if isinstance(posted, dict) else body)

    def condition(self, type_: str, status: str, reason: str, message: str = "") -> Condition:
        """Build a Condition (type, status True/False/Unknown, CamelCase reason, message)."""
        value: ConditionStatus = status  # type: ignore[assignment]
        return Condition(type_, value, reason, message)


_EVENT = ResourceKind("", "v1", "events", "Event", namespaced=True)


def _with_namespace(manifest: dict[str, Any], kind: ResourceKind, owner_namespace: str) -> dict[str, Any]:
    """A copy of the manifest with its namespace settled: the owner's for a namespaced child that names
    none, none for a cluster-scoped one."""
    desired = {**manifest, "metadata": dict(manifest.get("metadata") or {})}
    meta = desired["metadata"]
    if kind.namespaced:
        meta["namespace"] = meta.get("namespace") or owner_namespace
        if not meta["namespace"]:
            raise ValueError(f"{kind.kind} {meta.get('name')} is namespaced: the manifest must name a namespace")
    else:
        meta.pop("namespace", None)
    return desired


def _child_patch(desired: dict[str, Any], existing: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch that makes `existing` match `desired` and carry `ref`, or None when nothing differs."""
    patch: dict[str, Any] = {}
    for key, value in desired.items():
        if key in _IGNORED_TOP_LEVEL or key == "metadata":
            continue
        if not is_subset(value, existing.get(key)):
            patch[key] = value
    emeta = existing.get("metadata") or {}
    dmeta = desired.get("metadata") or {}
    meta_patch: dict[str, Any] = {}
    for field in ("labels", "annotations"):
        if dmeta.get(field) and not is_subset(dmeta[field], emeta.get(field) or {}):
            meta_patch[field] = dmeta[field]
    refs = list(emeta.get("ownerReferences") or [])
    if not any(r.get("uid") == ref["uid"] and r.get("controller") for r in refs):
        meta_patch["ownerReferences"] = [r for r in refs if r.get("uid") != ref["uid"]] + [ref]
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch or None
