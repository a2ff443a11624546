"""The object cache's store in the work queue's Redis keys (`reconcilers.engine.objectcache` reads it).

`objects` (hash key → `<resourceVersion> <JSON>`): the reconciled kinds and the kinds they own. The controller writes
it (`cache_objects`, `cache_prune`; with the keys those objects make dirty, `cache_and_add`: one round trip, the
objects stored before the keys) and keeps `objects-live` set while its informers run (`cache_live`); `claim` and
`claim_next` return the key's entry with the lease, `cached_child` a child's entry (only while `objects-live` is
set), and `cache_refresh` moves an existing entry forward to what a worker's write returned. A version older than
the one held is never stored.

The cache is bounded (issue 40): `cache_max_entries` (> 0; `reconcilers.engine.dispatch` sets it from
`OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES`) caps the entries. Past it, an object whose key has no entry yet is not
cached (its entries already held still move forward, and deletions still remove them): a run of that key finds no
entry and GETs its object, an apply of such a child is sent. Each one left out counts in
`opsconsole_object_cache_skipped_total`. 0: no cap.
"""

from __future__ import annotations

from reconcilers.engine import metrics
from reconcilers.engine.workqueue.enqueue import Enqueue
from reconcilers.engine.workqueue.lua import cache_args, text

SCRIPTS = {
    "cache_add": """
local n, skipped = tonumber(ARGV[2]), 0
for i = 4, 3 + 3 * n, 3 do
  if cache_put(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[3]) == 2 then skipped = skipped + 1 end
end
local marked = mark_all(4 + 3 * n)
marked[3] = skipped
return marked
""",
    "cache": """
local stored, skipped = 0, 0
for i = 3, #ARGV, 3 do
  local put = cache_put(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[2])
  if put == 2 then skipped = skipped + 1 else stored = stored + put end
end
return {stored, skipped}
""",
    "cache_refresh": """
if not redis.call('HGET', KEYS[9], ARGV[2]) then return 0 end  -- only the controller adds (and removes) entries
return cache_put(ARGV[2], ARGV[3], ARGV[4])
""",
    "cache_child": """
if redis.call('EXISTS', KEYS[10]) == 0 then return '' end
return redis.call('HGET', KEYS[9], ARGV[2]) or ''
""",
    "cache_live": """
if ARGV[2] == '' then redis.call('DEL', KEYS[10]) else redis.call('SET', KEYS[10], '1', 'PX', ARGV[2]) end
return 1
""",
    "cache_prune": """
local prefix, keep, gone = ARGV[2], {}, 0
for i = 3, #ARGV do keep[ARGV[i]] = true end
for _, key in ipairs(redis.call('HKEYS', KEYS[9])) do
  if string.sub(key, 1, #prefix) == prefix and not keep[key] then redis.call('HDEL', KEYS[9], key); gone = gone + 1 end
end
return gone
""",
}


class ObjectCache(Enqueue):
    """Storing, refreshing, pruning and reading the object cache's entries (with the keys they make dirty).
    `cache_max_entries`: the cap on entries (0: none; see the module docstring)."""

    cache_max_entries: int = 0
    cache_skipped: int = 0  # objects left out because the cache was full (tests, logs; the metric counts them too)

    def cache_and_add(self, entries: dict[str, tuple[str, str | bytes] | None], keys: list[str],
                      chunk: int = 500) -> tuple[list[str], list[str]]:
        """`cache_objects` then `add_many_queued`, in one round trip when the objects fit in one `chunk` (the
        controller's batch: its objects and the keys they make dirty); the objects are stored first, so a worker
        that claims one of these keys finds its object."""
        if len(entries) > chunk:
            self.cache_objects(entries, chunk)
            return self.add_many_queued(keys)
        sent, held, skipped = self._run("cache_add", str(len(entries)), str(self.cache_max_entries),
                                        *cache_args(entries.items()), *keys)
        self._count_skipped(int(skipped))
        return [text(k) for k in sent], [text(k) for k in held]

    def cache_objects(self, entries: dict[str, tuple[str, str | bytes] | None], chunk: int = 500) -> int:
        """Store objects in the object cache (`reconcilers.engine.objectcache`), key → (resourceVersion, JSON), or
        remove them (None); a version older than the one stored is not stored, nor a new key past
        `cache_max_entries`. One round trip per `chunk` entries. Returns how many entries changed."""
        items = list(entries.items())
        changed = 0
        for start in range(0, len(items), chunk):
            stored, skipped = self._run("cache", str(self.cache_max_entries), *cache_args(items[start:start + chunk]))
            changed += int(stored)
            self._count_skipped(int(skipped))
        return changed

    def _count_skipped(self, skipped: int) -> None:
        """Objects the cap left out: counted (`cache_skipped`, opsconsole_object_cache_skipped_total)."""
        if skipped:
            self.cache_skipped += skipped
            metrics.OBJECT_CACHE_SKIPPED.labels(self.name).inc(skipped)

    def cache_entries(self) -> int:
        """How many entries the object cache holds."""
        return int(self.redis.hlen(self.keys[8]))

    def cache_prune(self, prefix: str, present: set[str] | list[str]) -> int:
        """Remove the object cache's entries whose key starts with `prefix` (a kind's `group/version/plural/`) and
        is not in `present` (the keys a fresh list returned). Returns how many went."""
        return int(self._run("cache_prune", prefix, *present))

    def cached(self, key: str) -> str:
        """The object cache's entry for key ('<resourceVersion> <JSON>', '' when none)."""
        return text(self.redis.hget(self.keys[8], key) or b"")

    def cache_refresh(self, key: str, resource_version: str, body: str | bytes) -> bool:
        """Move an entry of the object cache forward to a version a worker just wrote (the object an apply
        returned): only an entry that exists (the controller adds and removes them; a write racing a deletion
        must not bring the object back) and holds an older version. True when it moved."""
        return self._run("cache_refresh", key, resource_version, body) == 1

    def cache_live(self, ttl: float | None) -> None:
        """Say that a controller's informers keep the object cache, for `ttl` seconds (None: no longer)."""
        self._run("cache_live", "" if ttl is None else str(max(1, int(ttl * 1000))))

    def cached_child(self, key: str) -> str:
        """The object cache's entry for key while a controller keeps the cache ('' when none, or when no
        controller said it keeps the cache within its time to live)."""
        return text(self._run("cache_child", key) or b"")
