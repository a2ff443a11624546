"""The owner resolver's memory (`owners.OwnerResolver`): uid → its `Lineage` (the registered root it leads to, or
None; its hops from the root; the workload revision it belongs to; the namespace it was read in), in a thread-safe
LRU with a TTL, a negative answer trusted for a shorter time, so that steady state costs no API call per Event.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from reconcilers.engine.healing.lineage import Anchor, Lineage

#: resolver cache bounds: entries, and how long an answer is trusted (a negative one shorter)
CACHE_ENTRIES = 20000
CACHE_TTL_SECONDS = 600.0
NEGATIVE_TTL_SECONDS = 60.0


class LineageCache:
    """uid → `Lineage`, in an LRU of `max_entries` with a TTL (`negative_ttl` for a lineage with no root);
    thread-safe."""

    def __init__(self, *, max_entries: int = CACHE_ENTRIES, ttl: float = CACHE_TTL_SECONDS,
                 negative_ttl: float = NEGATIVE_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.clock = clock
        self._cache: OrderedDict[str, tuple[Lineage, float]] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, uid: str) -> tuple[bool, str | None]:
        """(known, root uid or None) for one uid; an expired entry is unknown."""
        lineage = self.lineage(uid)
        return (False, None) if lineage is None else (True, lineage.root)

    def lineage(self, uid: str) -> Lineage | None:
        """The cached lineage of one uid (None: not known, or expired)."""
        with self._lock:
            entry = self._cache.get(uid)
            if entry is None:
                return None
            if entry[1] <= self.clock():
                del self._cache[uid]
                return None
            self._cache.move_to_end(uid)
            return entry[0]

    def remember(self, uid: str, root: str | None, *, hops: int | None = None, anchor: Anchor | None = None,
                 namespace: str | None = None) -> None:
        """Cache uid → root (None: leads to no registered object), `hops` from it (default: 0 for the root
        itself, else 1, a child the controller's informer names), the revision `anchor` it belongs to and the
        `namespace` it was read in, evicting the least recently used."""
        ttl = self.ttl if root is not None else self.negative_ttl
        lineage = Lineage(root, (0 if uid == root else 1) if hops is None else hops, anchor, namespace)
        with self._lock:
            self._cache[uid] = (lineage, self.clock() + ttl)
            self._cache.move_to_end(uid)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)
