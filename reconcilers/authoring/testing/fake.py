"""`FakeContext`: an in-memory `Context` for unit-testing a reconciler's `reconcile()` without an API server.

    ctx = FakeContext(obj, WebsiteReconciler)        # or FakeContext(obj, spec_model=WebsiteSpec)
    result = WebsiteReconciler().reconcile(ctx, ctx.obj)
    assert ctx.find("apps/v1", "Deployment", "ns", "web")["spec"]["replicas"] == 2

Like the engine's `EngineContext`, it has `spec` (the spec validated with the kind's `spec_model`, defaults
applied; the raw dict when the kind has none) and `spec_changed` (metadata.generation moved past
status.observedGeneration). The spec is validated when the reconciler first reads `ctx.spec`: an invalid one
raises the same `PermanentError` (reason `InvalidSpec`, naming each field) the reconcile step would, so
`reconcile()` fails the way it fails in the engine. Without `reconciler` or `spec_model`, the kind is looked
up among the loaded `Reconciler` subclasses by the object's apiVersion and kind.

Objects the reconciler applies, reads and deletes live in `objects`, keyed by (apiVersion, kind, namespace,
name); `put` and `find` are the test's side of it. Nothing here needs Django, Redis or a cluster.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from pydantic import BaseModel

from reconcilers.core.kind import validate_spec
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.types import Condition, ConditionStatus

_UNSET: Any = object()


def _subclasses(cls: type[Reconciler]) -> list[type[Reconciler]]:
    out: list[type[Reconciler]] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def spec_model_for(obj: dict[str, Any]) -> type[BaseModel] | None:
    """The spec model of the loaded Reconciler subclass(es) of the object's apiVersion and kind (None when
    none declares one); ValueError when two such kinds declare different models."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    models = {
        sub.spec_model
        for sub in _subclasses(Reconciler)
        if getattr(sub, "resource", None) is not None and sub.spec_model is not None
        and sub.resource.api_version == api_version and sub.resource.kind == kind
    }
    if len(models) > 1:
        names = ", ".join(sorted(m.__qualname__ for m in models))
        raise ValueError(f"several spec models for {api_version} {kind} ({names}): pass FakeContext(obj, "
                         f"reconciler=...) or spec_model=...")
    return next(iter(models), None)


class FakeContext:
    """Records what a reconciler asks for; `objects` maps (apiVersion, kind, namespace, name) to objects.

    `reconciler` (a Reconciler class or instance) or `spec_model` (a KindModel) types `spec`; with neither, the
    spec model of the loaded Reconciler subclass for the object's apiVersion and kind, if any."""

    def __init__(
        self,
        obj: dict[str, Any],
        reconciler: Reconciler | type[Reconciler] | None = None,
        *,
        spec_model: type[BaseModel] | None = None,
    ) -> None:
        self.obj = obj
        meta = obj["metadata"]
        self.namespace = meta.get("namespace", "")
        self.reconciler = reconciler
        if spec_model is None and reconciler is not None:
            spec_model = reconciler.spec_model
        self._spec_model: type[BaseModel] | None | Any = _UNSET if reconciler is None and spec_model is None \
            else spec_model
        self._spec: Any = _UNSET
        status = obj.get("status") or {}
        observed = status.get("observedGeneration") if isinstance(status, dict) else None
        #: whether metadata.generation moved since the generation last handled (status.observedGeneration)
        self.spec_changed: bool = isinstance(observed, int) and int(meta.get("generation") or 0) > observed
        self.log = logging.getLogger("test")
        self.api_client = None
        self.span = None
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.applied: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.finalizers: list[str] = list(meta.get("finalizers") or [])
        self.events: list[tuple[str, str, str]] = []
        self.keep_after_delete: set[tuple[str, str]] = set()

    @property
    def spec(self) -> Any:
        """The object's spec validated with the kind's spec model (defaults applied), or the raw dict without
        one. An invalid spec raises PermanentError(reason=InvalidSpec), as the reconcile step would."""
        if self._spec is _UNSET:
            model = spec_model_for(self.obj) if self._spec_model is _UNSET else self._spec_model
            self._spec = validate_spec(model, self.obj) if model is not None else (self.obj.get("spec") or {})
        return self._spec

    @spec.setter
    def spec(self, value: Any) -> None:
        self._spec = value

    @staticmethod
    def _key(api_version: str, kind: str, namespace: str, name: str) -> tuple[str, str, str, str]:
        return (api_version, kind, namespace or "", name)

    def apply_child(self, manifest: dict[str, Any]) -> dict[str, Any]:
        manifest = copy.deepcopy(manifest)
        meta = manifest["metadata"]
        key = self._key(manifest["apiVersion"], manifest["kind"], meta.get("namespace", ""), meta["name"])
        self.applied.append(manifest)
        current = self.objects.get(key)
        merged = {**(current or {}), **manifest}
        merged["metadata"] = {**((current or {}).get("metadata") or {}), **meta,
                              "ownerReferences": [{"uid": self.obj["metadata"]["uid"], "controller": True}]}
        if current and "status" in current:
            merged["status"] = current["status"]
        self.objects[key] = merged
        return copy.deepcopy(merged)

    def get(self, kind: ResourceKind, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.objects.get(self._key(kind.api_version, kind.kind, namespace, name))
        return copy.deepcopy(obj) if obj else None

    def delete(self, kind: ResourceKind, namespace: str, name: str) -> bool:
        self.deleted.append((kind.kind, namespace, name))
        key = self._key(kind.api_version, kind.kind, namespace, name)
        if (kind.kind, name) in self.keep_after_delete:
            return key in self.objects
        return self.objects.pop(key, None) is not None

    def list(self, kind: ResourceKind, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict[str, Any]]:
        wanted = dict(p.split("=", 1) for p in (label_selector or "").split(",") if p)
        out = []
        for (api_version, k, ns, _name), obj in self.objects.items():
            if api_version != kind.api_version or k != kind.kind or (namespace and ns != namespace):
                continue
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if all(labels.get(a) == b for a, b in wanted.items()):
                out.append(copy.deepcopy(obj))
        return out

    def list_children(self, kind: ResourceKind) -> list[dict[str, Any]]:
        return [o for o in self.list(kind) if o["metadata"].get("ownerReferences")]

    def add_finalizer(self, name: str) -> None:
        if name not in self.finalizers:
            self.finalizers.append(name)

    def remove_finalizer(self, name: str) -> None:
        self.finalizers = [f for f in self.finalizers if f != name]

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def condition(self, type_: str, status: ConditionStatus, reason: str, message: str = "") -> Condition:
        return Condition(type_, status, reason, message)

    # test helpers
    def put(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[self._key(obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def find(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(self._key(api_version, kind, namespace, name))
