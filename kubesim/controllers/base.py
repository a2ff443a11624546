"""A level-based controller: store events mark keys dirty; ``sync(key)`` is one step that may ask for a requeue."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.meta import clone, now, random_suffix
from kubesim.store import Event, controller_uid

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

log = logging.getLogger("kubesim.controllers")


class Controller:
    """Subclasses implement ``keys_for(event)`` and ``sync(key) -> seconds to requeue after | None``."""

    name = "controller"

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.cluster = sim.cluster
        self.store = sim.store
        self._dirty: dict[Hashable, None] = {}
        self._wake: asyncio.Event | None = None
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}

    # ---- to implement -------------------------------------------------------------------------------
    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        """The keys an event makes dirty."""
        return ()

    def initial_keys(self) -> Iterable[Hashable]:
        """Keys to sync once at start (objects loaded from disk)."""
        return ()

    def object_keys(self, key: tuple[str, str]) -> list[tuple[str, str]]:
        """(namespace, name) of every stored object of one resource: the usual initial keys."""
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in self.store.items(key)]

    def sync(self, key: Any) -> float | None:
        """Bring one key to its desired state; return a delay to be called again, or None."""
        raise NotImplementedError

    # ---- machinery ----------------------------------------------------------------------------------
    def on_event(self, ev: Event) -> None:
        """Store listener (synchronous, cheap)."""
        for key in self.keys_for(ev):
            self.enqueue(key)

    def enqueue(self, key: Hashable) -> None:
        """Mark a key dirty."""
        self._dirty[key] = None
        if self._wake is not None:
            self._wake.set()

    def enqueue_after(self, key: Hashable, delay: float) -> None:
        """Mark a key dirty after ``delay`` seconds (the earliest request wins)."""
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        if existing is not None:
            if existing.when() <= loop.time() + delay:
                return
            existing.cancel()

        def fire() -> None:
            self._timers.pop(key, None)
            self.enqueue(key)

        self._timers[key] = loop.call_later(delay, fire)

    def run_once(self) -> int:
        """Sync every dirty key once; returns how many were synced (for tests that step by hand)."""
        keys = list(self._dirty)
        self._dirty.clear()
        for key in keys:
            try:
                delay = self.sync(key)
            except errors.ApiError as e:
                if e.code not in (404, 409):
                    log.warning("%s: sync %s: %s", self.name, key, e.message)
                delay = 0.05
            except Exception:  # noqa: BLE001 - a controller must keep running
                log.exception("%s: sync %s failed", self.name, key)
                delay = 1.0
            if delay is not None:
                self.enqueue_after(key, delay)
        return len(keys)

    async def run(self) -> None:
        """Loop until cancelled."""
        self._wake = asyncio.Event()
        self.store.listeners.append(self.on_event)
        for key in self.initial_keys():
            self._dirty[key] = None
        try:
            while True:
                if not self._dirty:
                    self._wake.clear()
                    await self._wake.wait()
                self.run_once()
                await asyncio.sleep(0)
        finally:
            self.store.listeners.remove(self.on_event)
            for t in self._timers.values():
                t.cancel()

    # ---- helpers ------------------------------------------------------------------------------------
    def record_event(self, obj: dict[str, Any], etype: str, reason: str, message: str, component: str) -> None:
        """Post a core/v1 Event about ``obj`` (as the real controllers do)."""
        rt = self.cluster.resource("", "events")
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        if self.store.get(("", "namespaces"), "", ns) is None:
            return
        stamp = now()
        api_version = obj.get("apiVersion", "v1")
        event = {
            "metadata": {"name": f"{meta['name']}.{random_suffix(8)}", "namespace": ns},
            "involvedObject": {"kind": obj.get("kind"), "namespace": meta.get("namespace"), "name": meta["name"],
                               "uid": meta.get("uid"), "apiVersion": api_version,
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": etype, "count": 1,
            "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "reportingComponent": component, "reportingInstance": "",
        }
        try:
            self.cluster.create(rt, ns, event)
        except errors.ApiError:
            pass

    @staticmethod
    def owner_ref(obj: dict[str, Any], controller: bool = True) -> dict[str, Any]:
        """An ownerReference to ``obj`` as controllers set it."""
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
                "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}

    @staticmethod
    def controller_uid(obj: dict[str, Any]) -> str | None:
        """The uid of the controlling owner."""
        return controller_uid(obj["metadata"])

    def write_status(self, rt: Any, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Write ``status`` through the status subresource (a no-op when unchanged)."""
        if obj.get("status") == status:
            return obj
        new = dict(obj)
        new["metadata"] = clone(obj["metadata"])
        new["status"] = status
        return self.cluster.replace(rt, obj, new, subresource="status")
