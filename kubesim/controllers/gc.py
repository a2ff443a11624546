"""Garbage collector: dependents of deleted owners, Foreground and Orphan propagation, dangling references."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.cluster.deleting import FOREGROUND, ORPHAN
from kubesim.controllers.base import Controller
from kubesim.meta import clone
from kubesim.store import Event, Key

Item = tuple[Key, str, str]  # (store key, namespace, name)


class GarbageCollector(Controller):
    """Keeps a uid index and an owner → dependents index up to date from store events."""

    name = "garbage-collector"

    def __init__(self, sim: Any) -> None:
        super().__init__(sim)
        self.by_uid: dict[str, Item] = {}
        self.dependents: dict[str, set[Item]] = {}
        for key, obj in self.store.all_items():
            self._index(key, obj)

    def _index(self, key: Key, obj: dict[str, Any]) -> Item:
        meta = obj["metadata"]
        item = (key, meta.get("namespace", ""), meta["name"])
        self.by_uid[meta["uid"]] = item
        for ref in meta.get("ownerReferences") or []:
            self.dependents.setdefault(ref.get("uid", ""), set()).add(item)
        return item

    def _unindex_refs(self, item: Item, obj: dict[str, Any] | None) -> None:
        if obj is None:
            return
        for ref in obj["metadata"].get("ownerReferences") or []:
            deps = self.dependents.get(ref.get("uid", ""))
            if deps is not None:
                deps.discard(item)
                if not deps:
                    del self.dependents[ref.get("uid", "")]

    def initial_keys(self) -> Iterable[Hashable]:
        return [self.by_uid[u] for u in list(self.by_uid)]

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        meta = ev.obj["metadata"]
        item = (ev.key, meta.get("namespace", ""), meta["name"])
        self._unindex_refs(item, ev.prev)
        out: list[Item] = []
        if ev.type == "DELETED":
            self.by_uid.pop(meta["uid"], None)
            out.extend(self.dependents.get(meta["uid"], ()))
            for ref in meta.get("ownerReferences") or []:  # an owner may be waiting for this one
                owner = self.by_uid.get(ref.get("uid", ""))
                if owner is not None:
                    out.append(owner)
            return out
        self._index(ev.key, ev.obj)
        prev_meta = (ev.prev or {}).get("metadata") or {}
        if meta.get("ownerReferences") and (ev.type == "ADDED" or meta.get("ownerReferences")
                                            != prev_meta.get("ownerReferences")):
            out.append(item)
        if meta.get("deletionTimestamp") and (meta.get("finalizers") != prev_meta.get("finalizers")
                                              or not prev_meta.get("deletionTimestamp")):
            out.append(item)
            out.extend(self.dependents.get(meta["uid"], ()))
        return out

    def _get(self, item: Item) -> dict[str, Any] | None:
        return self.store.get(*item)

    def _rt(self, key: Key) -> Any:
        return self.cluster.registry.get(*key)

    def sync(self, item: Item) -> float | None:
        obj = self._get(item)
        if obj is None:
            return None
        rt = self._rt(item[0])
        if rt is None:
            return None
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if ORPHAN in finalizers:
                self._orphan_dependents(meta["uid"])
                self._drop_finalizer(rt, obj, ORPHAN)
                return None
            if FOREGROUND in finalizers:
                return self._foreground(rt, obj)
        refs = meta.get("ownerReferences") or []
        if not refs or meta.get("deletionTimestamp"):
            return None
        solid, gone, waiting = [], [], []
        for ref in refs:
            owner_item = self.by_uid.get(ref.get("uid", ""))
            owner = self._get(owner_item) if owner_item else None
            if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
                gone.append(ref)
            elif owner["metadata"].get("deletionTimestamp") and FOREGROUND in (owner["metadata"].get("finalizers")
                                                                                or []):
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            if gone or waiting:
                new = dict(obj)
                new["metadata"] = clone(meta)
                new["metadata"]["ownerReferences"] = solid
                self.cluster.replace(rt, obj, new)
            return None
        policy = "Foreground" if waiting and self.dependents.get(meta["uid"]) else "Background"
        self.cluster.delete(rt, item[1], item[2], {"propagationPolicy": policy})
        return None

    def _orphan_dependents(self, uid: str) -> None:
        for dep_item in list(self.dependents.get(uid, ())):
            dep = self._get(dep_item)
            rt = self._rt(dep_item[0])
            if dep is None or rt is None:
                continue
            new = dict(dep)
            new["metadata"] = clone(dep["metadata"])
            new["metadata"]["ownerReferences"] = [r for r in dep["metadata"].get("ownerReferences") or []
                                                  if r.get("uid") != uid]
            if not new["metadata"]["ownerReferences"]:
                del new["metadata"]["ownerReferences"]
            self.cluster.replace(rt, dep, new)

    def _foreground(self, rt: Any, owner: dict[str, Any]) -> float | None:
        uid = owner["metadata"]["uid"]
        blocking = 0
        for dep_item in list(self.dependents.get(uid, ())):
            dep = self._get(dep_item)
            dep_rt = self._rt(dep_item[0])
            if dep is None or dep_rt is None:
                continue
            refs = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") == uid]
            if not refs:
                continue
            if any(r.get("blockOwnerDeletion") for r in refs):
                blocking += 1
            if not dep["metadata"].get("deletionTimestamp"):
                policy = "Foreground" if self.dependents.get(dep["metadata"]["uid"]) else "Background"
                self.cluster.delete(dep_rt, dep_item[1], dep_item[2], {"propagationPolicy": policy})
        still = sum(1 for d in self.dependents.get(uid, ()) if self._get(d) is not None and any(
            r.get("uid") == uid and r.get("blockOwnerDeletion")
            for r in self._get(d)["metadata"].get("ownerReferences") or []))
        if still == 0:
            current = self.cluster.find(rt, owner["metadata"].get("namespace", ""), owner["metadata"]["name"])
            if current is not None:
                self._drop_finalizer(rt, current, FOREGROUND)
            return None
        return 0.5 if blocking else None

    def _drop_finalizer(self, rt: Any, obj: dict[str, Any], finalizer: str) -> None:
        new = dict(obj)
        new["metadata"] = clone(obj["metadata"])
        new["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        self.cluster.replace(rt, obj, new)

    def sweep(self) -> int:
        """Queue every object that has ownerReferences (the periodic resync); returns how many."""
        n = 0
        for deps in list(self.dependents.values()):
            for item in deps:
                self.enqueue(item)
                n += 1
        return n

    async def run(self) -> None:
        """The controller loop plus a periodic sweep every ``gc_interval`` seconds."""
        import asyncio

        async def sweeper() -> None:
            while True:
                await asyncio.sleep(max(self.sim.options.gc_interval, 0.05))
                self.sweep()

        task = asyncio.get_running_loop().create_task(sweeper())
        try:
            await super().run()
        finally:
            task.cancel()
