"""A level-based controller: store events mark keys dirty; ``sync(key)`` is one step that may ask for a requeue."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.meta import clone, now
from kubesim.store import Event, controller_uid

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

log = logging.getLogger("kubesim.controllers")

#: Events remembered for aggregation per controller (client-go's EventCorrelator keeps an LRU of 4096)
EVENT_INDEX_SIZE = 4096


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
        self._event_index: OrderedDict[tuple[str, ...], str] = OrderedDict()

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
        """Post a core/v1 Event about ``obj`` as client-go's EventCorrelator does: a repeat of an Event (same
        namespace, involved object, type, reason, message and source component) bumps its ``count`` and
        ``lastTimestamp``; otherwise a new Event named ``<involved name>.<16 hex>`` is created with count 1."""
        rt = self.cluster.resource("", "events")
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        if self.store.get(("", "namespaces"), "", ns) is None:
            return
        key = (ns, meta.get("uid") or meta["name"], etype, reason, message, component)
        try:
            if self._bump_event(rt, key):
                return
            self._create_event(rt, key, obj)
        except errors.ApiError:
            pass

    def _bump_event(self, rt: Any, key: tuple[str, ...]) -> bool:
        """Count one more occurrence on the indexed Event of ``key``; False when there is none any more."""
        name = self._event_index.get(key)
        if name is None:
            return False
        old = self.cluster.find(rt, key[0], name)
        if old is None or _event_key(old) != key:
            del self._event_index[key]
            return False
        new = clone(old)
        new["count"] = int(old.get("count") or 1) + 1
        new["lastTimestamp"] = now()
        self.cluster.replace(rt, old, new)
        self._event_index.move_to_end(key)
        return True

    def _create_event(self, rt: Any, key: tuple[str, ...], obj: dict[str, Any]) -> None:
        ns, _, etype, reason, message, component = key
        meta = obj["metadata"]
        stamp = now()
        event = {
            "metadata": {"namespace": ns},
            "involvedObject": {"kind": obj.get("kind"), "namespace": meta.get("namespace"), "name": meta["name"],
                               "uid": meta.get("uid"), "apiVersion": obj.get("apiVersion", "v1"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": etype, "count": 1,
            "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "reportingComponent": component, "reportingInstance": "",
        }
        stamp_ns = time.time_ns()
        for attempt in range(5):
            event["metadata"]["name"] = f"{meta['name']}.{stamp_ns + attempt:016x}"
            try:
                created = self.cluster.create(rt, ns, clone(event))
            except errors.ApiError as e:
                if e.code == 409:
                    continue
                raise
            self._event_index[key] = created["metadata"]["name"]
            if len(self._event_index) > EVENT_INDEX_SIZE:
                self._event_index.popitem(last=False)
            return

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


def _event_key(event: dict[str, Any]) -> tuple[str, ...]:
    """What makes two Events the same for aggregation (the key ``record_event`` indexes them by)."""
    involved = event.get("involvedObject") or {}
    return (event["metadata"]["namespace"], involved.get("uid") or involved.get("name"), event.get("type"),
            event.get("reason"), event.get("message"), (event.get("source") or {}).get("component"))
