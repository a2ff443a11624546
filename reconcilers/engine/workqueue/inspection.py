"""What the console, the API and the controller's metrics read of the work queue: snapshots, per-kind depths and
the depth history. None of it changes the queue's state: `record_depth` only appends a sample to the history (its
own Redis list, `depth-history`), which the console's workers page draws."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from reconcilers.engine.workqueue.core import QueueCore
from reconcilers.engine.workqueue.lua import text

#: depth samples kept (one every DEPTH_SAMPLE_SECONDS in the controller: an hour)
DEPTH_HISTORY = 240

SCRIPTS = {
    "snapshot": """
local limit = tonumber(ARGV[2])
local processing, busy_dirty = {}, 0
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries, 2 do
  local dirty = redis.call('ZSCORE', KEYS[1], entries[i]) and 1 or 0
  busy_dirty = busy_dirty + dirty
  if #processing < limit * 2 then
    table.insert(processing, entries[i]); table.insert(processing, entries[i + 1] .. '|' .. dirty)
  end
end
local pending = {}
local dirty = redis.call('ZRANGE', KEYS[1], 0, limit + #entries / 2 - 1, 'WITHSCORES')
for i = 1, #dirty, 2 do
  if #pending < limit * 2 and redis.call('HEXISTS', KEYS[2], dirty[i]) == 0 then
    table.insert(pending, dirty[i]); table.insert(pending, dirty[i + 1])
  end
end
local delayed = redis.call('ZRANGE', KEYS[4], 0, limit - 1, 'WITHSCORES')
local fails = {}
for i = 1, #delayed, 2 do table.insert(fails, redis.call('HGET', KEYS[5], delayed[i]) or '0') end
return {f(now), redis.call('ZCARD', KEYS[1]) - busy_dirty, #entries / 2, redis.call('ZCARD', KEYS[4]),
  processing, pending, delayed, fails}
""",
    "depths": """
local out, busy = {}, {}
local function slot(key)
  -- the kind's prefix of a key in either form: group/version/plural/ns/name, or cluster/ in front of it
  local p = string.match(key, '^([^/]*/[^/]*/[^/]*)/[^/]*/[^/]*$')
    or string.match(key, '^[^/]*/([^/]*/[^/]*/[^/]*)/[^/]*/[^/]*$')
    or string.match(key, '^([^/]*/[^/]*/[^/]*)/') or ''
  if not out[p] then out[p] = {0, 0, 0} end
  return out[p]
end
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries, 2 do
  busy[entries[i]] = true
  local s, running = slot(entries[i]), math.max(0, now - tonumber(cjson.decode(entries[i + 1]).since))
  s[2] = s[2] + running
  if running > s[3] then s[3] = running end
end
for _, key in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if not busy[key] then local s = slot(key); s[1] = s[1] + 1 end
end
local flat = {}
for p, s in pairs(out) do
  table.insert(flat, p); table.insert(flat, s[1]); table.insert(flat, f(s[2])); table.insert(flat, f(s[3]))
end
return flat
""",
}


@dataclass(frozen=True)
class PendingItem:
    """A key waiting for a worker, dirty since queued_at."""

    key: str
    queued_at: float


@dataclass(frozen=True)
class ProcessingItem:
    """A key being reconciled by owner since `since`, under a lease until lease_expires."""

    key: str
    owner: str
    since: float
    lease_expires: float
    dirty: bool  # changed while processing: done() re-queues it


@dataclass(frozen=True)
class DelayedItem:
    """A key waiting in the delayed set until next_retry."""

    key: str
    failures: int  # 0: a RequeueAfter; > 0: backing off after that many failures
    next_retry: float


@dataclass(frozen=True)
class QueueSnapshot:
    """The queue's state at one instant. `depth` counts keys waiting for a worker (not processing)."""

    name: str
    now: float
    depth: int
    processing_count: int
    delayed_count: int
    pending: list[PendingItem] = field(default_factory=list)
    processing: list[ProcessingItem] = field(default_factory=list)
    backing_off: list[DelayedItem] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for the console and the API)."""
        return asdict(self)


@dataclass
class KindDepth:
    """One kind's share of the queue, for the workqueue gauges."""

    pending: int
    unfinished_seconds: float
    longest_running_seconds: float


class Inspection(QueueCore):
    """The queue's state for the console, the API and the metrics."""

    def snapshot(self, limit: int = 1000) -> QueueSnapshot:
        """The queue's state for the console/API; lists hold at most `limit` items each (counts are exact)."""
        now, depth, nproc, ndelayed, proc, pending, delayed, fails = self._run("snapshot", str(limit))
        processing = []
        for i in range(0, len(proc), 2):
            raw, dirty = text(proc[i + 1]).rsplit("|", 1)
            entry = json.loads(raw)
            processing.append(ProcessingItem(text(proc[i]), entry["owner"], float(entry["since"]),
                                             float(entry["expires"]), dirty == "1"))
        return QueueSnapshot(
            name=self.name, now=float(now), depth=int(depth), processing_count=int(nproc),
            delayed_count=int(ndelayed),
            pending=[PendingItem(text(pending[i]), float(pending[i + 1])) for i in range(0, len(pending), 2)],
            processing=sorted(processing, key=lambda p: (p.since, p.key)),
            backing_off=[DelayedItem(text(delayed[i]), int(fails[i // 2]), float(delayed[i + 1]))
                         for i in range(0, len(delayed), 2)],
        )

    def depths(self) -> dict[str, KindDepth]:
        """Per kind (the key prefix `group/version/plural`, whichever cluster the key is of): keys waiting
        (dirty, not processing), and the seconds the running reconciles have run, summed and longest. Counts in
        Redis and returns only the sums, so the controller's metrics cost the same with 10 keys queued or
        10 000."""
        flat = self._run("depths")
        return {text(flat[i]): KindDepth(int(flat[i + 1]), float(flat[i + 2]), float(flat[i + 3]))
                for i in range(0, len(flat), 4)}

    def record_depth(self, depth: int, at: float, keep: int = DEPTH_HISTORY) -> None:
        """Append one sample of the queue's depth (keys waiting) at `at` (epoch seconds) to its history, which keeps
        the newest `keep` samples (the controller samples it; the console's workers page draws it)."""
        key = self.prefix + "depth-history"
        pipe = self.redis.pipeline(transaction=False)
        pipe.lpush(key, f"{at:.3f} {int(depth)}")
        pipe.ltrim(key, 0, keep - 1)
        pipe.execute()

    def depth_history(self, limit: int = DEPTH_HISTORY) -> list[tuple[float, int]]:
        """The depth samples, oldest first: (epoch seconds, keys waiting)."""
        raw = self.redis.lrange(self.prefix + "depth-history", 0, limit - 1)
        out = []
        for item in raw:
            at, _, depth = text(item).partition(" ")
            try:
                out.append((float(at), int(depth)))
            except ValueError:
                continue
        return out[::-1]
