"""Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018), as Argo CD shards its
application controller: which shard owns which key.

Each shard has `VIRTUAL_NODES` points on a 64-bit ring. A key (an object's uid) goes to the first shard clockwise
from the key's own point that still has room; a shard has room while it holds fewer than
ceil(`load_factor` × keys / shards) keys. Keys are placed in the order of their points, so the assignment is a
pure function of the key set and the shard set: every replica that sees the same keys and the same shards
computes the same owner for every key, without talking to the others.

Plain consistent hashing moves only the keys of a shard that leaves (and about 1/N of every shard's keys to one
that joins) but can leave one shard with far more than its share; the bound caps that at `load_factor` times the
mean, at the cost of a few more keys moving when membership changes (the keys that spilled past a full shard).
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Iterable, Sequence

#: points per shard on the ring: more points, a more even split before the bound applies
VIRTUAL_NODES = 128
#: how far above the mean a shard may be loaded (Argo CD and the paper's experiments use 1.25)
DEFAULT_LOAD_FACTOR = 1.25


def point(text: str) -> int:
    """A key's or a virtual node's place on the ring: 64 bits of BLAKE2b (stable across processes and hosts,
    unlike `hash()`)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class Ring:
    """The ring of a set of shards (their ids; order does not matter)."""

    def __init__(self, shards: Iterable[str], *, virtual_nodes: int = VIRTUAL_NODES) -> None:
        self.shards = tuple(sorted(set(shards)))
        if not self.shards:
            raise ValueError("a ring needs at least one shard")
        nodes = sorted((point(f"{shard}#{i}"), shard) for shard in self.shards for i in range(virtual_nodes))
        self._points = [p for p, _ in nodes]
        self._owners = [s for _, s in nodes]

    def preference(self, key: str) -> list[str]:
        """Every shard once, in the order the ring offers them to `key` (clockwise from the key's point)."""
        start = bisect.bisect_left(self._points, point(key))
        seen: list[str] = []
        size = len(self._points)
        for i in range(size):
            shard = self._owners[(start + i) % size]
            if shard not in seen:
                seen.append(shard)
                if len(seen) == len(self.shards):
                    break
        return seen

    def owner(self, key: str) -> str:
        """The shard plain consistent hashing gives `key` (no bound: for one key alone)."""
        start = bisect.bisect_left(self._points, point(key)) % len(self._points)
        return self._owners[start]

    def assign(self, keys: Iterable[str], *, load_factor: float = DEFAULT_LOAD_FACTOR) -> dict[str, str]:
        """Every key's shard, no shard holding more than ceil(load_factor × keys / shards) (see the module)."""
        if load_factor < 1.0:
            raise ValueError("load_factor must be at least 1")
        ordered = sorted((point(k), k) for k in set(keys))  # each key hashed once
        capacity = math.ceil(load_factor * len(ordered) / len(self.shards)) if ordered else 0
        loads = dict.fromkeys(self.shards, 0)
        size = len(self._points)
        assigned: dict[str, str] = {}
        for at, key in ordered:
            i = bisect.bisect_left(self._points, at)
            while loads[self._owners[i % size]] >= capacity:
                i += 1
            shard = self._owners[i % size]
            loads[shard] += 1
            assigned[key] = shard
        return assigned


def moved(before: dict[str, str], after: dict[str, str]) -> int:
    """How many keys present in both assignments changed shard."""
    return sum(1 for key, shard in after.items() if key in before and before[key] != shard)


def loads(assignment: dict[str, str], shards: Sequence[str]) -> dict[str, int]:
    """Keys per shard (every shard named, 0 included)."""
    counts = dict.fromkeys(shards, 0)
    for shard in assignment.values():
        counts[shard] = counts.get(shard, 0) + 1
    return counts
