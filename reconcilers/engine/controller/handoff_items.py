"""What waits in the controller's handoff (`handoff.Handoff`), and how it waits: the mirror's updates and sweeps,
an Event with its previous state, a key's triggers, and their packed forms (`slim.pack`: compact JSON bytes, about a
sixth of the memory of the same object as Python dicts), with the packer that packs an object handed to both the
object cache and the mirror only once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.engine.controller.slim import pack, unpack


@dataclass(frozen=True)
class MirrorUpdate:
    """The newest state of one object for the Resource mirror; `deleted` when it is gone."""

    kind: ResourceKind
    uid: str
    obj: dict[str, Any]
    deleted: bool = False
    reconciler: Reconciler | None = None  # the kind's (its deletion is recorded through its state machine)


@dataclass(frozen=True)
class MirrorSweep:
    """An informer of a reconciled kind (re-)listed, starting at `listed_at`: the mirror's live rows of that kind
    that the cluster no longer has are to be recorded deleted."""

    kind: tuple[str, str]  # (group, plural)
    listed_at: datetime


EventPair = tuple[dict[str, Any], dict[str, Any] | None]  # (an Event as seen, its previous state or None)
Why = tuple[list[dict[str, Any]], int]  # a key's triggers (oldest first, bounded) and how many were dropped
PackedPair = tuple[bytes, bytes | None]  # an EventPair as it waits


@dataclass(frozen=True)
class PackedMirror:
    """A MirrorUpdate as it waits: its object packed."""

    kind: ResourceKind
    uid: str
    obj: bytes
    deleted: bool
    reconciler: Reconciler | None

    @classmethod
    def of(cls, update: MirrorUpdate, packed: bytes) -> PackedMirror:
        return cls(update.kind, update.uid, packed, update.deleted, update.reconciler)

    def update(self) -> MirrorUpdate:
        return MirrorUpdate(self.kind, self.uid, unpack(self.obj), self.deleted, self.reconciler)


class LastPacked:
    """The last object packed and its bytes: the router hands the same object to the object cache and to the mirror,
    one after the other, and both then wait in the same bytes (packed once)."""

    def __init__(self) -> None:
        self._obj: dict[str, Any] | None = None
        self._packed = b""
        self._lock = threading.Lock()

    def pack(self, obj: dict[str, Any]) -> bytes:
        with self._lock:
            if obj is self._obj:
                return self._packed
        packed = pack(obj)
        with self._lock:
            self._obj, self._packed = obj, packed
        return packed


def pack_or_none(obj: dict[str, Any] | None) -> bytes | None:
    return pack(obj) if obj is not None else None


def unpack_or_none(data: bytes | None) -> dict[str, Any] | None:
    return unpack(data) if data is not None else None


def pack_pair(pair: EventPair) -> PackedPair:
    return pack(pair[0]), pack_or_none(pair[1])


def unpack_pair(packed: PackedPair) -> EventPair:
    return unpack(packed[0]), unpack_or_none(packed[1])
