"""Namespace lifecycle (deleting a namespace deletes its content), default ServiceAccounts, CRD cleanup."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.cluster.deleting import CRD_CLEANUP
from kubesim.controllers.base import Controller
from kubesim.meta import clone, now
from kubesim.store import Event

NS_KEY = ("", "namespaces")
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


class NamespaceController(Controller):
    """Empties terminating namespaces, then removes the ``kubernetes`` finalizer so they go."""

    name = "namespace"

    def initial_keys(self) -> Iterable[Hashable]:
        return [o["metadata"]["name"] for o in self.store.items(NS_KEY) if o["metadata"].get("deletionTimestamp")]

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == NS_KEY:
            if ev.type != "DELETED" and ev.obj["metadata"].get("deletionTimestamp"):
                return [ev.obj["metadata"]["name"]]
            return ()
        ns = ev.obj["metadata"].get("namespace")
        if ns and ev.type == "DELETED":
            nso = self.store.get(NS_KEY, "", ns)
            if nso is not None and nso["metadata"].get("deletionTimestamp"):
                return [ns]
        return ()

    def _namespaced_types(self) -> list[Any]:
        seen: dict[Any, Any] = {}
        for rt in self.cluster.registry:
            if rt.namespaced and rt.key not in seen:
                seen[rt.key] = rt
        return list(seen.values())

    def sync(self, name: str) -> float | None:
        ns_rt = self.cluster.resource("", "namespaces")
        ns = self.cluster.find(ns_rt, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return None
        remaining: dict[str, int] = {}
        finalizers: set[str] = set()
        for rt in self._namespaced_types():
            for obj in list(self.store.items(rt.key, name)):
                meta = obj["metadata"]
                if not meta.get("deletionTimestamp"):
                    self.cluster.delete(rt, name, meta["name"], {"propagationPolicy": "Background"})
                if self.store.get(rt.key, name, meta["name"]) is not None:
                    remaining[rt.plural if not rt.group else f"{rt.plural}.{rt.group}"] = \
                        remaining.get(rt.plural, 0) + 1
                    finalizers.update(meta.get("finalizers") or [])
        ns = self.cluster.find(ns_rt, "", name)
        if ns is None:
            return None
        if not remaining:
            spec_finalizers = [f for f in (ns.get("spec") or {}).get("finalizers") or [] if f != "kubernetes"]
            self.cluster.finalize_namespace(name, spec_finalizers)
            return None
        stamp = now()
        conds = [
            {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
             "message": "Some resources are remaining: " + ", ".join(f"{k} has {v} resource instances"
                                                                     for k, v in sorted(remaining.items())),
             "lastTransitionTime": stamp},
            {"type": "NamespaceFinalizersRemaining", "status": "True" if finalizers else "False",
             "reason": "SomeFinalizersRemain" if finalizers else "ContentHasNoFinalizers",
             "message": ("Some content in the namespace has finalizers remaining: " + ", ".join(sorted(finalizers)))
             if finalizers else "All content-preserving finalizers finished", "lastTransitionTime": stamp},
        ]
        old_conds = (ns.get("status") or {}).get("conditions") or []
        if [(c["type"], c["status"], c["message"]) for c in old_conds] != \
                [(c["type"], c["status"], c["message"]) for c in conds]:
            self.write_status(ns_rt, ns, dict(ns.get("status") or {}, conditions=conds))
        return None


class ServiceAccountController(Controller):
    """Every active namespace has a ``default`` ServiceAccount."""

    name = "serviceaccount"

    def initial_keys(self) -> Iterable[Hashable]:
        return [o["metadata"]["name"] for o in self.store.items(NS_KEY)]

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == NS_KEY and ev.type == "ADDED":
            return [ev.obj["metadata"]["name"]]
        if ev.key == ("", "serviceaccounts") and ev.type == "DELETED" and ev.obj["metadata"]["name"] == "default":
            return [ev.obj["metadata"]["namespace"]]
        return ()

    def sync(self, name: str) -> float | None:
        ns = self.store.get(NS_KEY, "", name)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return None
        rt = self.cluster.resource("", "serviceaccounts")
        if self.cluster.find(rt, name, "default") is None:
            self.cluster.create(rt, name, {"metadata": {"name": "default"}})
        return None


class CRDCleanupController(Controller):
    """Deleting a CRD deletes its custom objects, then the CRD itself goes (and stops being served)."""

    name = "crd-cleanup"

    def initial_keys(self) -> Iterable[Hashable]:
        return [o["metadata"]["name"] for o in self.store.items(CRD_KEY) if o["metadata"].get("deletionTimestamp")]

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == CRD_KEY and ev.type != "DELETED" and ev.obj["metadata"].get("deletionTimestamp"):
            return [ev.obj["metadata"]["name"]]
        if ev.type == "DELETED" and ev.key[0] and "." in ev.key[0]:
            crd = self.store.get(CRD_KEY, "", f"{ev.key[1]}.{ev.key[0]}")
            if crd is not None and crd["metadata"].get("deletionTimestamp"):
                return [crd["metadata"]["name"]]
        return ()

    def sync(self, name: str) -> float | None:
        crd_rt = self.cluster.resource(*CRD_KEY)
        crd = self.cluster.find(crd_rt, "", name)
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return None
        spec = crd["spec"]
        rt = self.cluster.registry.get(spec["group"], spec["names"]["plural"])
        left = 0
        if rt is not None:
            for obj in list(self.store.items(rt.key)):
                meta = obj["metadata"]
                if not meta.get("deletionTimestamp"):
                    self.cluster.delete(rt, meta.get("namespace", ""), meta["name"])
                if self.store.get(rt.key, meta.get("namespace", ""), meta["name"]) is not None:
                    left += 1
        if left:
            return None
        crd = self.cluster.find(crd_rt, "", name)
        if crd is None:
            return None
        new = dict(crd)
        new["metadata"] = clone(crd["metadata"])
        new["metadata"]["finalizers"] = [f for f in crd["metadata"].get("finalizers") or [] if f != CRD_CLEANUP]
        self.cluster.replace(crd_rt, crd, new)
        return None
