"""An in-memory Context for testing reconcilers without an API server."""

from __future__ import annotations

import copy
import logging
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.core.types import Condition, ConditionStatus


class FakeContext:
    """Records what a reconciler asks for; `objects` maps (apiVersion, kind, namespace, name) to objects."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        meta = obj["metadata"]
        self.namespace = meta.get("namespace", "")
        self.log = logging.getLogger("test")
        self.api_client = None
        self.span = None
        self.objects: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.applied: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str, str]] = []
        self.finalizers: list[str] = list(meta.get("finalizers") or [])
        self.events: list[tuple[str, str, str]] = []
        self.keep_after_delete: set[tuple[str, str]] = set()

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
