"""A per-process memo of the console's slow reads (a Lease, a worker ping, the overview's figures, the shards):
each answered from memory for a time to live, and, for reads that leave the process, refreshed in the background
while the stale value is answered.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)
_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()
_refreshing: set[str] = set()
_generation = 0  # bumped by stats_cache_clear: a refresh started before it does not store its value


def cached(name: str, ttl: float, compute: Any, *, background: bool = False) -> Any:
    """A per-process memo of a slow read (a Lease, a worker ping, the overview's figures) for `ttl` seconds.
    With `background`, a stale value is answered at once while one thread reads the new one (for reads that
    leave the process and may wait on a timeout: no request waits for them but the first)."""
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(name)
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
        if hit is not None and background:
            if name not in _refreshing:
                _refreshing.add(name)
                threading.Thread(target=_refresh, args=(name, compute, _generation), daemon=True,
                                 name=f"stats-refresh-{name}").start()
            return hit[1]
        generation = _generation
    value = compute()
    with _cache_lock:
        if generation == _generation:
            _cache[name] = (time.monotonic(), value)
    return value


def _refresh(name: str, compute: Any, generation: int) -> None:
    try:
        value = compute()
    except Exception:  # the reads report their own errors; this only keeps the stale value
        log.exception("refreshing %s failed", name)
        value = None
    with _cache_lock:
        _refreshing.discard(name)
        if value is not None and generation == _generation:
            _cache[name] = (time.monotonic(), value)


def stats_cache_clear() -> None:
    """Forget the memoised reads (tests)."""
    global _generation
    with _cache_lock:
        _cache.clear()
        _refreshing.clear()
        _generation += 1
