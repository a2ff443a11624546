"""The in-memory object store: one cluster-wide resourceVersion counter, bounded event history, watchers.

Objects are plain JSON dicts at their storage version and are never mutated once stored: every write
stores a fresh dict, so readers may serialise them without copying.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubesim.meta import dumps_bytes

Key = tuple[str, str]  # (group, plural)


def controller_uid(meta: dict[str, Any]) -> str | None:
    """The uid of an object's controlling owner (its ownerReference with controller: true), if any."""
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


@dataclass(slots=True)
class Event:
    """One change: ADDED, MODIFIED or DELETED, with the new (or last) state and the previous one."""

    type: str
    key: Key
    rv: int
    obj: dict[str, Any]
    prev: dict[str, Any] | None
    lines: dict[Any, bytes] | None = None  # serialised watch lines, shared by all watchers

    @property
    def namespace(self) -> str:
        return self.obj["metadata"].get("namespace", "")


@dataclass(eq=False)
class Watcher:
    """A subscription to the events of one resource (optionally one namespace)."""

    key: Key
    namespace: str | None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    closed: bool = False


class Journal(Protocol):
    """What persists store writes (see :mod:`kubesim.persistence`)."""

    def record(self, op: str, key: Key, obj: dict[str, Any], rv: int) -> None: ...


class Store:
    """Objects by (group, plural) → namespace → name, the resourceVersion counter and the watch history."""

    def __init__(self, history_size: int = 10000, max_watch_queue: int = 100000) -> None:
        self.rv = 0
        self.objects: dict[Key, dict[str, dict[str, dict[str, Any]]]] = {}
        self.history: deque[Event] = deque(maxlen=history_size)
        self.compacted_rv = 0  # the newest resourceVersion no longer in the history
        self.watchers: dict[Key, set[Watcher]] = {}
        self.listeners: list[Callable[[Event], None]] = []
        self.journal: Journal | None = None
        self.max_watch_queue = max_watch_queue
        self._encoded: dict[int, tuple[dict[str, Any], bytes]] = {}  # id(stored obj) -> (obj, its JSON)
        # (key, controller owner uid) -> {(namespace, name)}: the objects a controller owns, without a scan
        self._controlled: dict[tuple[Key, str], set[tuple[str, str]]] = {}
        # (key, label, value) -> {(namespace, name)}: a list by `label=value` reads these, not every object
        self._labelled: dict[tuple[Key, str, str], set[tuple[str, str]]] = {}

    # reads
    def get(self, key: Key, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object or None."""
        return self.objects.get(key, {}).get(namespace, {}).get(name)

    def items(self, key: Key, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """Stored objects of one resource, optionally in one namespace, in (namespace, name) order."""
        by_ns = self.objects.get(key, {})
        namespaces = [namespace] if namespace is not None else sorted(by_ns)
        for ns in namespaces:
            names = by_ns.get(ns, {})
            for name in sorted(names):
                yield names[name]

    def controlled_by(self, key: Key, namespace: str, uid: str) -> list[dict[str, Any]]:
        """Stored objects of one resource in ``namespace`` whose controlling ownerReference has ``uid``, in name
        order (an index kept by every write: a controller's sync does not scan every object of the kind)."""
        refs = sorted(ref for ref in self._controlled.get((key, uid), ()) if ref[0] == namespace)
        return [obj for ns, name in refs if (obj := self.get(key, ns, name)) is not None]

    def labelled(self, key: Key, namespace: str | None, label: str, value: str) -> Iterator[dict[str, Any]]:
        """Stored objects of one resource (optionally in one namespace) whose `label` is `value`, in (namespace,
        name) order, from an index kept by every write."""
        refs = self._labelled.get((key, label, value), ())
        for ns, name in sorted(r for r in refs if namespace is None or r[0] == namespace):
            obj = self.get(key, ns, name)
            if obj is not None:
                yield obj

    def count_labelled(self, key: Key, label: str, value: str) -> int:
        """How many objects of one resource have `label` = `value` (all namespaces)."""
        return len(self._labelled.get((key, label, value), ()))

    def _index(self, key: Key, obj: dict[str, Any] | None, add: bool) -> None:
        """Add `obj` to (or take it out of) the controller and label indexes."""
        if obj is None:
            return
        meta = obj["metadata"]
        ref = (meta.get("namespace", ""), meta["name"])
        entries: list[tuple[dict[Any, set[tuple[str, str]]], tuple[Any, ...]]] = [
            (self._labelled, (key, k, v)) for k, v in (meta.get("labels") or {}).items() if isinstance(v, str)]
        if (uid := controller_uid(meta)) is not None:
            entries.append((self._controlled, (key, uid)))
        for index, entry in entries:
            if add:
                index.setdefault(entry, set()).add(ref)
                continue
            refs = index.get(entry)
            if refs is not None:
                refs.discard(ref)
                if not refs:
                    del index[entry]

    def count(self, key: Key, namespace: str | None = None) -> int:
        """How many objects of one resource."""
        by_ns = self.objects.get(key, {})
        if namespace is not None:
            return len(by_ns.get(namespace, {}))
        return sum(len(v) for v in by_ns.values())

    def all_items(self) -> Iterator[tuple[Key, dict[str, Any]]]:
        """Every stored object with its key."""
        for key, by_ns in list(self.objects.items()):
            for names in list(by_ns.values()):
                for obj in list(names.values()):
                    yield key, obj

    # writes
    def next_rv(self) -> int:
        """Advance the counter (like an etcd revision)."""
        self.rv += 1
        return self.rv

    def put(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` (a fresh dict owned by the store from now on) under a new resourceVersion."""
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        names = self.objects.setdefault(key, {}).setdefault(ns, {})
        prev = names.get(name)
        if prev is not None:
            self._encoded.pop(id(prev), None)
        rv = self.next_rv()
        meta["resourceVersion"] = str(rv)
        names[name] = obj
        self._index(key, prev, add=False)
        self._index(key, obj, add=True)
        self._emit(Event("MODIFIED" if prev is not None else "ADDED", key, rv, obj, prev), "put")
        return obj

    def remove(self, key: Key, namespace: str, name: str, final: dict[str, Any] | None = None
               ) -> dict[str, Any] | None:
        """Delete an object; the DELETED event carries its last state (``final`` if given) at the
        deletion's resourceVersion."""
        names = self.objects.get(key, {}).get(namespace)
        if not names or name not in names:
            return None
        prev = names.pop(name)
        self._encoded.pop(id(prev), None)
        self._index(key, prev, add=False)
        if not names:
            del self.objects[key][namespace]
        rv = self.next_rv()
        last = dict(final if final is not None else prev)
        last["metadata"] = dict(last["metadata"], resourceVersion=str(rv))
        self._emit(Event("DELETED", key, rv, last, prev), "delete")
        return last

    def encoded(self, key: Key, obj: dict[str, Any]) -> bytes:
        """``obj`` as compact JSON, cached while ``obj`` is the stored version (objects are immutable)."""
        hit = self._encoded.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        data = dumps_bytes(obj)
        meta = obj.get("metadata") or {}
        if self.get(key, meta.get("namespace", ""), meta.get("name", "")) is obj:
            self._encoded[id(obj)] = (obj, data)
        return data

    def load(self, key: Key, obj: dict[str, Any]) -> None:
        """Insert an object read from disk (no event, no counter change)."""
        meta = obj["metadata"]
        names = self.objects.setdefault(key, {}).setdefault(meta.get("namespace", ""), {})
        self._index(key, names.get(meta["name"]), add=False)
        names[meta["name"]] = obj
        self._index(key, obj, add=True)

    def unload(self, key: Key, namespace: str, name: str) -> None:
        """Drop an object while replaying a journal (no event)."""
        names = self.objects.get(key, {}).get(namespace, {})
        self._index(key, names.pop(name, None), add=False)

    def _emit(self, ev: Event, op: str) -> None:
        if len(self.history) == self.history.maxlen and self.history:
            self.compacted_rv = self.history[0].rv
        self.history.append(ev)
        if self.journal is not None:
            self.journal.record(op, ev.key, ev.obj, ev.rv)
        for w in self.watchers.get(ev.key, ()):
            if w.closed or (w.namespace is not None and w.namespace != ev.namespace):
                continue
            if w.queue.qsize() >= self.max_watch_queue:
                w.closed = True  # too slow: the apiserver would drop it as well
                w.queue.put_nowait(None)
                continue
            w.queue.put_nowait(ev)
        for listener in self.listeners:
            listener(ev)

    # watching
    def subscribe(self, key: Key, namespace: str | None) -> Watcher:
        """Register a watcher; events written from now on are queued to it."""
        w = Watcher(key, namespace)
        self.watchers.setdefault(key, set()).add(w)
        return w

    def unsubscribe(self, w: Watcher) -> None:
        """Forget a watcher."""
        w.closed = True
        self.watchers.get(w.key, set()).discard(w)

    def close_watchers(self, key: Key) -> None:
        """End the watch streams of one resource (its CRD went away)."""
        for w in list(self.watchers.get(key, ())):
            w.closed = True
            w.queue.put_nowait(None)

    def close_all_watchers(self) -> None:
        """End every watch stream (on shutdown)."""
        for ws in self.watchers.values():
            for w in list(ws):
                w.closed = True
                w.queue.put_nowait(None)

    def history_since(self, key: Key, namespace: str | None, rv: int) -> list[Event] | None:
        """Events of one resource after ``rv``; None when ``rv`` is older than the kept history."""
        if rv < self.compacted_rv:
            return None
        out = []
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            if ev.key == key and (namespace is None or ev.namespace == namespace):
                out.append(ev)
        out.reverse()
        return out
