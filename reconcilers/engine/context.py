"""The `Context` a reconciler runs with: the API client, a logger, the span, and the helpers it acts through.

- `apply_child(manifest)`: server-side apply of a child, one PATCH (`application/apply-patch+yaml`) with the
  kind's field manager (`opsconsole-<reconciler name>`) and force=true: the applied configuration is the
  manifest plus a controller ownerReference to the reconciled object (controller=true,
  blockOwnerDeletion=true). The API server creates a missing child, sets back fields someone else changed,
  removes fields the engine applied before and no longer does, and writes nothing when nothing differs (the
  resourceVersion stays). An unowned child is adopted; a child that another controller owns is not taken
  over: the API refuses a second controller reference (422), and the context, seeing the other controller
  on a GET, raises TemporaryError ChildOwnedElsewhere (the garbage collector usually removes such an orphan
  of an earlier object of the same name). The manifest carries its digest (`childcache.with_digest`); with a
  `child_cache`, an apply that would change nothing (`childcache.apply_unchanged`: the cached child carries this
  manifest's digest and every value it names) is not sent, and the cached child is the answer.
  `children` records every child applied, as the API returned it (or the cache had it).
- `get` / `list` / `delete` / `list_children` for any `ResourceKind`.
- `add_finalizer` / `remove_finalizer`: a JSON merge patch carrying the resourceVersion read (409 → re-read,
  retry), so a concurrent change is never overwritten; the context's `obj` follows every write.
- `event(type, reason, message)`: a core/v1 Event about the reconciled object (best effort: an Event that
  cannot be posted is logged, never fails the reconcile).
- `condition(...)`: builds a `Condition` (the reconcile step stamps lastTransitionTime and observedGeneration).

All API calls go through `reconcilers.engine.kube`.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

from reconcilers.core.meta import FIELD_MANAGER, controller_ref, now_rfc3339
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.types import Condition, ConditionStatus, Request, TemporaryError
from reconcilers.engine import kube
from reconcilers.engine.childcache import ChildCache, apply_unchanged, with_digest

REPORTING_COMPONENT = "opsconsole-controller"
_CONFLICT_ATTEMPTS = 5

log = logging.getLogger(__name__)


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
        child_cache: ChildCache | None = None,
    ) -> None:
        self.reconciler = reconciler
        #: the children's object cache (None: every apply_child is sent), and the applies sent and not sent
        self.child_cache = child_cache
        self.applies_sent = 0
        self.applies_unchanged = 0
        self.kind: ResourceKind = reconciler.resource
        self.obj = obj
        meta = obj.get("metadata") or {}
        self.request = request or self.kind.request(meta.get("namespace") or "", meta["name"])
        self.api_client = api_client
        self.log = log or logging.getLogger(f"reconcilers.{reconciler.name}")
        self.span = span
        #: every child `apply_child` applied in this reconcile, in order, as the API returned it (the same
        #: child twice when applied twice); an apply that changed nothing kept the child's resourceVersion
        self.children: list[dict[str, Any]] = []
        #: the validated spec (the reconcile step sets it from the kind's spec_model; the raw dict without one)
        self.spec: Any = obj.get("spec") or {}
        status = obj.get("status") or {}
        observed = status.get("observedGeneration") if isinstance(status, dict) else None
        #: whether metadata.generation moved since the generation last handled (status.observedGeneration)
        self.spec_changed: bool = isinstance(observed, int) and int(meta.get("generation") or 0) > observed

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

    @property
    def field_manager(self) -> str:
        """The server-side apply field manager of this kind's children: `opsconsole-<reconciler name>`."""
        return f"opsconsole-{self.reconciler.name}"

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
        return [o for o in self.list(kind, where) if (controller_ref(o) or {}).get("uid") == uid]

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
        """Server-side apply `manifest` with a controller ownerReference to the reconciled object (created when
        missing, put back to the manifest when changed). Returns the child as the API has it afterwards, or, when
        the object cache shows that the apply would change nothing, as the controller's informer last saw it.
        Raises TemporaryError ChildOwnedElsewhere when another controller owns the child."""
        kind = self.resolve(manifest["apiVersion"], manifest["kind"])
        desired = _with_namespace(manifest, kind, self.namespace)
        meta = desired["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        ref = self.owner_reference()
        meta["ownerReferences"] = [ref]
        desired = with_digest(desired)
        cache_key = kind.request(namespace, name).key()
        cached = self.child_cache.get(cache_key) if self.child_cache is not None else None
        if cached is not None and apply_unchanged(desired, cached):
            self.applies_unchanged += 1
            self.children.append(cached)
            return cached
        try:
            applied = kube.apply_object(self.api_client, kind, namespace or None, name, desired,
                                        field_manager=self.field_manager, force=True)
        except kube.ApiException as exc:
            # 422: most likely our controller reference next to another one (at most one is allowed)
            if exc.status == 422:
                owner = controller_ref(kube.get_object(self.api_client, kind, namespace or None, name))
                if owner is not None and owner.get("uid") != ref["uid"]:
                    raise TemporaryError(
                        f"{kind.kind} {namespace + '/' if namespace else ''}{name} is controlled by "
                        f"{owner.get('kind')} {owner.get('name')} (uid {owner.get('uid')})",
                        delay=2.0, reason="ChildOwnedElsewhere") from exc
            raise
        self.applies_sent += 1
        if self.child_cache is not None and cached is not None:
            self.child_cache.put(cache_key, applied)
        self.children.append(applied)
        return applied

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
                result = kube.patch_object(self.api_client, self.kind, self.namespace or None, self.request.name, patch,
                                           field_manager=FIELD_MANAGER)
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
            kube.create_object(self.api_client, _EVENT, body, body["metadata"]["namespace"])
        except Exception as exc:  # an Event is a courtesy: the database is the record
            self.log.warning("could not post event %s for %s: %s", reason, self.request, exc)

    def condition(self, type_: str, status: ConditionStatus, reason: str, message: str = "") -> Condition:
        """Build a Condition (type, status True/False/Unknown, CamelCase reason, message)."""
        return Condition(type_, status, reason, message)


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

