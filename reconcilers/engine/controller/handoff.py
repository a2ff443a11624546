"""The thread-safe handoff between informer threads (which put) and the controller loop (which takes).

Keys are coalesced (a key put twice before the loop takes it is taken once, in first-put order), each with the
triggers that put it (`reconcilers.engine.triggers`: kept together, at most `triggers.BOUND`, the rest counted);
objects for the
object cache per key, keeping the newest state (None: deleted); mirror
updates are coalesced per uid keeping the newest state; mirror sweeps (after an informer's list) per kind,
keeping the newest list's time; Kubernetes Events for the archive per Event uid keeping the newest state, at most
`max_events` waiting (beyond, the oldest are dropped: the archive never holds the loop's memory hostage while the
database is away). A put wakes the loop at once.

What waits is held packed (`slim.pack`: compact JSON bytes, about a sixth of the memory of the same object as
Python dicts), as the informers' stores hold their objects: the objects for the object cache, the mirror updates'
objects and the Events with their previous states are packed on put and unpacked, each a fresh dict, on take (issue
40: a burst of changes must not hold every object twice, once in the store and whole here). Nothing is dropped:
the object cache and the mirror get each object as the watch delivered it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import islice
from typing import Any

from reconcilers.engine import triggers as why
from reconcilers.engine.controller.handoff_items import (  # re-exported: what the loop's parts import from here
    EventPair,
    LastPacked,
    MirrorSweep,
    MirrorUpdate,
    PackedMirror,
    PackedPair,
    Why,
    pack_or_none,
    pack_pair,
    unpack_or_none,
    unpack_pair,
)
from reconcilers.engine.controller.slim import pack

#: Kubernetes Events waiting for the archive, at most (the oldest are dropped beyond)
MAX_EVENTS = 10000


class Handoff:
    """Keys to enqueue and mirror updates to write, handed from threads to the loop."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, None] = {}
        self._why: dict[str, Why] = {}  # the triggers of the keys waiting (a key put without one has none)
        self._objects: dict[str, bytes | None] = {}  # packed (None: deleted)
        self._mirror: dict[str, PackedMirror] = {}
        self._mirror_left: dict[str, PackedMirror] = {}  # left by a take (`leave`), older than all in _mirror
        self._sweeps: dict[tuple[str, str], MirrorSweep] = {}
        self._events: dict[str, PackedPair] = {}
        self._packer = LastPacked()
        self.max_events = max_events
        self.events_dropped = 0  # Events dropped because too many waited (logs, tests)
        self._wake = threading.Event()

    def put_key(self, key: str, trigger: dict[str, Any] | None = None) -> None:
        """A key to enqueue, with the trigger that makes it (coalesced with those already waiting)."""
        with self._lock:
            self._keys[key] = None
            if trigger is not None:
                kept, dropped = self._why.get(key) or ([], 0)
                self._why[key] = why.merge(kept, dropped, (trigger,))
        self._wake.set()

    def put_keys(self, keys: list[str], triggers: dict[str, Why] | None = None) -> None:
        """Put several keys (used to give back keys the loop could not enqueue, with their `triggers`), ahead of
        newer ones (their triggers too)."""
        with self._lock:
            self._keys = {**dict.fromkeys(keys), **self._keys}
            for key, (kept, dropped) in (triggers or {}).items():
                newer, newer_dropped = self._why.get(key) or ([], 0)
                self._why[key] = why.merge(kept, dropped + newer_dropped, newer)
        self._wake.set()

    def take_triggers(self, keys: list[str]) -> dict[str, Why]:
        """The triggers waiting for these keys (taken), for the keys that have any."""
        with self._lock:
            return {key: taken for key in keys if (taken := self._why.pop(key, None)) is not None}

    def put_object(self, key: str, obj: dict[str, Any] | None) -> None:
        """The newest state of the object of `key` for the object cache (None: it was deleted)."""
        packed = self._packer.pack(obj) if obj is not None else None
        with self._lock:
            self._objects.pop(key, None)  # re-insert: the newest goes last
            self._objects[key] = packed
        self._wake.set()

    def take_objects_and_keys(self, limit: int) -> tuple[dict[str, dict[str, Any] | None], list[str]]:
        """Every object waiting for the object cache and up to `limit` keys, taken at one instant: a handler puts
        an object before the keys it queues, so every key taken has its object among these or written before
        (taken apart, a key put between the two takes would go to a worker before its object)."""
        with self._lock:
            packed, self._objects = self._objects, {}
            keys = self._take_keys_locked(limit)
        return {key: unpack_or_none(data) for key, data in packed.items()}, keys

    def put_objects_back(self, objects: dict[str, dict[str, Any] | None]) -> None:
        """Give back objects the loop could not write (a newer state of the same key wins)."""
        packed = {key: pack_or_none(obj) for key, obj in objects.items()}
        with self._lock:
            self._objects = {**packed, **self._objects}

    def put_mirror(self, update: MirrorUpdate) -> None:
        packed = PackedMirror.of(update, self._packer.pack(update.obj))
        with self._lock:
            self._mirror.pop(update.uid, None)  # re-insert: the newest goes last
            self._mirror_left.pop(update.uid, None)  # a newer state: looked at again
            self._mirror[update.uid] = packed
        self._wake.set()

    def put_sweep(self, sweep: MirrorSweep) -> None:
        with self._lock:
            self._sweeps[sweep.kind] = sweep
        self._wake.set()

    def take_sweeps(self) -> list[MirrorSweep]:
        """Every sweep waiting, oldest kind first."""
        with self._lock:
            taken, self._sweeps = list(self._sweeps.values()), {}
            return taken

    def put_sweeps_back(self, sweeps: list[MirrorSweep]) -> None:
        """Give back sweeps the loop could not do (a newer one of the same kind wins)."""
        with self._lock:
            self._sweeps = {**{s.kind: s for s in sweeps}, **self._sweeps}

    def put_event(self, uid: str, event: EventPair) -> None:
        """An Event for the archive; a newer state of the same Event (uid) replaces the waiting one, keeping the
        first previous state (what the archive compares against)."""
        packed = pack(event[0])
        with self._lock:
            waiting = self._events.pop(uid, None)
            self._events[uid] = (packed, waiting[1] if waiting is not None else pack_or_none(event[1]))
            self._trim_events()
        self._wake.set()

    def put_events_back(self, events: list[tuple[str, EventPair]]) -> None:
        """Give back Events the loop could not archive, ahead of newer ones (a newer state of the same uid wins)."""
        packed = [(uid, pack_pair(pair)) for uid, pair in events]
        with self._lock:
            self._events = {**{uid: pair for uid, pair in packed if uid not in self._events}, **self._events}
            self._trim_events()

    def _trim_events(self) -> None:
        while len(self._events) > self.max_events:
            del self._events[next(iter(self._events))]
            self.events_dropped += 1

    def take_events(self, limit: int) -> list[tuple[str, EventPair]]:
        """Up to `limit` Events (uid, (event, previous)), oldest first."""
        with self._lock:
            taken = []
            for uid in self._events:
                if len(taken) >= limit:
                    break
                taken.append(uid)
            packed = [(uid, self._events.pop(uid)) for uid in taken]
        return [(uid, unpack_pair(pair)) for uid, pair in packed]

    def take_keys(self, limit: int) -> list[str]:
        """Up to `limit` keys, oldest first."""
        with self._lock:
            return self._take_keys_locked(limit)

    def _take_keys_locked(self, limit: int) -> list[str]:
        taken = []
        for key in self._keys:
            if len(taken) >= limit:
                break
            taken.append(key)
        for key in taken:
            del self._keys[key]
        return taken

    def take_mirror(self, limit: int, leave: Callable[[MirrorUpdate], bool] | None = None) -> list[MirrorUpdate]:
        """Up to `limit` mirror updates, oldest first. Those `leave` says to leave stay, set aside: later takes with
        a `leave` do not look at them again (a newer state of the same uid is looked at), the next take without
        one takes them first."""
        with self._lock:
            taken: list[MirrorUpdate] = []
            if leave is None:
                taken = [self._mirror_left.pop(uid).update() for uid in list(islice(self._mirror_left, limit))]
            picked: list[MirrorUpdate] = []
            aside: list[str] = []
            for uid, packed in self._mirror.items():
                if len(taken) + len(picked) >= limit:
                    break
                update = packed.update()
                if leave is not None and leave(update):
                    aside.append(uid)
                else:
                    picked.append(update)
            for uid in aside:
                self._mirror_left[uid] = self._mirror.pop(uid)
            for update in picked:
                del self._mirror[update.uid]
            return taken + picked

    def pending(self) -> tuple[int, int]:
        """(keys, mirror updates) waiting."""
        with self._lock:
            return len(self._keys), len(self._mirror) + len(self._mirror_left)

    def events_pending(self) -> int:
        """Events waiting for the archive."""
        with self._lock:
            return len(self._events)

    def clear(self) -> None:
        """Drop everything (on losing leadership)."""
        with self._lock:
            self._keys.clear()
            self._why.clear()
            self._objects.clear()
            self._mirror.clear()
            self._mirror_left.clear()
            self._sweeps.clear()
            self._events.clear()
        self._packer = LastPacked()

    def wait(self, timeout: float) -> bool:
        """Sleep until something is put (or `wake()`), at most `timeout` seconds; re-arms the wakeup."""
        woke = self._wake.wait(max(0.0, timeout))
        self._wake.clear()
        return woke

    def wake(self) -> None:
        """Wake the loop (e.g. to stop)."""
        self._wake.set()
