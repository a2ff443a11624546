"""One measurement of bench/memory, in a process of its own:

    python -m bench.memory.measure KUBECONFIG slim|full

The controller as `wiring.build_controller` builds it for the Memcached reconciler, its backends replaced by doubles
that keep nothing (no Redis, no database: the Events archive, the mirror and the object cache are fed and drained
as in production, their writes counted and dropped), runs until its informers have listed and everything handed off
is written. Then it prints one JSON line: the process's RSS before the informers started, after, after the C
allocator gave its free memory back (what is left is what the process holds; the difference is the high-water mark
of the lists and handoffs, which glibc keeps) and its peak; the deep size of each informer's cache (`deep_size`);
the objects per kind; and the object cache's payload (the JSON the controller would write into Redis) per kind.
With `BENCH_MEMORY_REDIS_URL` set, the newest entries are also stored in that Redis, one scratch hash per kind
as the workqueue stores them (`<resourceVersion> <JSON>`), and `MEMORY USAGE` of each (every field sampled) is
reported before the hashes are deleted: what the object cache costs Redis.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

#: how long the controller may take to list and drain everything (seconds)
SETTLE_TIMEOUT = 600.0


def rss_kib() -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of this process, in KiB (Linux)."""
    found: dict[str, int] = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    return found


def malloc_trim() -> bool:
    """Give the C allocator's free memory back to the system (glibc's malloc_trim); False where there is none."""
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def deep_size(roots: Iterable[Any]) -> int:
    """Bytes held by `roots` and everything they reach through dicts, lists, tuples and sets (sys.getsizeof of
    each object once: strings shared between objects, such as the dict keys orjson reuses, count once)."""
    seen: set[int] = set()
    stack = list(roots)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
    return total


def informer_cache_bytes(informer: Any) -> int:
    """The deep size of one informer's cache: its objects by key, and its uid index."""
    return deep_size([informer._cache, informer._uids])


def measure(kubeconfig: str, mode: str) -> dict[str, Any]:
    """Run the controller until it has listed and drained everything; what it holds (see the module docstring)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    import django

    django.setup()
    from reconcilers.engine import kube, objectcache
    from reconcilers.engine.controller.wiring import build_controller
    from reconcilers.kinds.memcached import MemcachedReconciler

    payload: dict[str, int] = {}  # object cache key -> bytes of its newest entry
    entries: dict[str, bytes] = {}  # object cache key -> its newest entry (with a Redis to measure in)
    redis_url = os.environ.get("BENCH_MEMORY_REDIS_URL", "")
    writes = [0]

    def cache_write(objects: dict[str, dict[str, Any] | None]) -> None:
        writes[0] += 1
        for key, obj in objects.items():
            if obj is None:
                payload.pop(key, None)
                entries.pop(key, None)
            else:
                rv, body = objectcache.encode(obj)
                payload[key] = len(body)
                if redis_url:
                    entries[key] = rv.encode() + b" " + body

    api = kube.build_api_client(kubeconfig)
    controller = build_controller(
        api, [MemcachedReconciler()], enqueue=lambda key: True, pump=lambda: 0, queue_depths=lambda: {},
        mirror=True, mirror_write=lambda updates: None, mirror_sweep=lambda *args: [], archive_events=True,
        events_write=lambda batch: len(batch), heal_interval=0, checkpoint_seconds=0, object_cache=True,
        cache_write=cache_write, cache_prune=lambda prefix, present: None, cache_live=lambda ttl: None)
    controller.informer_set.slim = mode == "slim"
    if mode == "full":  # before issue 40: the object cache's children whole too
        from reconcilers.engine.controller import routing

        routing.slim = lambda obj: obj  # type: ignore[assignment]
    gc.collect()
    before = rss_kib()
    started = time.monotonic()
    thread = threading.Thread(target=controller.run, name="controller", daemon=True)
    thread.start()
    _settle(controller, lambda: writes[0])
    listed = time.monotonic() - started
    gc.collect()
    after = rss_kib()
    trimmed = rss_kib() if malloc_trim() else after
    informers = {f"{inf.kind.plural}": inf for inf in controller.informer_set.all()}
    result = {
        "mode": mode,
        "rss_before_kib": before["VmRSS"], "rss_after_kib": after["VmRSS"], "rss_peak_kib": after["VmHWM"],
        "rss_trimmed_kib": trimmed["VmRSS"],
        "list_seconds": round(listed, 2),
        "objects": {name: len(inf.keys()) for name, inf in informers.items()},
        "cache_bytes": {name: informer_cache_bytes(inf) for name, inf in informers.items()},
        "object_cache_payload": _by_kind(payload),
        "redis_bytes": redis_usage(redis_url, entries) if redis_url else {},
    }
    controller.request_stop()
    thread.join(30)
    api.close()
    return result


def redis_usage(url: str, entries: dict[str, bytes]) -> dict[str, int]:
    """`MEMORY USAGE` (every field sampled) of the entries stored per kind in scratch hashes of the Redis at `url`,
    as the workqueue's object cache stores them; the hashes are deleted after."""
    import uuid

    import redis

    client = redis.Redis.from_url(url)
    scratch = f"bench-memory:{uuid.uuid4().hex[:8]}:"
    by_kind: dict[str, dict[str, bytes]] = {}
    for key, entry in entries.items():
        by_kind.setdefault(key.split("/")[2], {})[key] = entry
    usage: dict[str, int] = {}
    try:
        for plural, fields in by_kind.items():
            items = list(fields.items())
            for start in range(0, len(items), 500):
                client.hset(scratch + plural, mapping=dict(items[start:start + 500]))
            usage[plural] = int(client.memory_usage(scratch + plural, samples=0) or 0)
    finally:
        client.delete(*[scratch + plural for plural in by_kind] or [scratch])
        client.close()
    return usage


def _by_kind(payload: dict[str, int]) -> dict[str, int]:
    """Object cache payload bytes per plural (the key's third part)."""
    kinds: dict[str, int] = {}
    for key, size in payload.items():
        plural = key.split("/")[2]
        kinds[plural] = kinds.get(plural, 0) + size
    return kinds


def _settle(controller: Any, writes: Any) -> None:
    """Wait until every informer (Events' too) has listed, nothing handed off waits and no object cache write
    happened, twice 1 s apart."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    quiet, last = 0, -1
    while quiet < 2:
        if time.monotonic() > deadline:
            raise RuntimeError("the controller did not settle")
        time.sleep(1.0)
        informers = controller.informer_set.all()
        handoff = controller.handoff
        settled = (bool(informers) and all(inf.synced.is_set() for inf in informers)
                   and handoff.pending() == (0, 0) and handoff.events_pending() == 0 and writes() == last)
        last = writes()
        quiet = quiet + 1 if settled else 0


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2])))
