"""The reconcile workqueue, kept in Redis so that every worker on every host shares it.

It has client-go's workqueue semantics (docs/architecture.md), with Celery as the transport for "this key is ready":

- `dirty` (sorted set key → queued_at): keys that need a reconcile. An add of a key already dirty is
  coalesced; an add of a key being processed only marks it dirty, and `done()` re-queues it exactly once.
- `processing` (hash key → JSON owner/since/expires/queued) and `leases` (sorted set key → lease expiry):
  one reconcile per key at a time. A worker `claim()`s the key's lease, `renew()`s it during a long
  reconcile (every lease_seconds / 3 or so: a lease that lapses while its owner still runs lets another
  worker in) and releases it with `done()`. A lease that expires (worker killed) is re-queued by
  `reap_expired()`.
- `delayed` (sorted set key → due time): RequeueAfter and retry backoff, released by `release_due()`;
  never Celery ETA/countdown, which the Redis broker redelivers after its visibility timeout.
- `failures` (hash key → count) and `bucket` (hash tokens/ts): controller-runtime's default rate limiter,
  MaxOf(per-key exponential backoff base·2^n capped, overall token bucket qps/burst).
- `dispatched` (sorted set key → when its "sent" mark is due for a check) and `resent` (hash key → copies
  re-sent): a key is marked sent before its task is handed to the broker, so a process killed in between
  (the controller during a burst, a worker between `done()` and the send) leaves a key marked sent whose task
  never was. A dirty key not claimed within `redispatch_after` (a few seconds) is dispatched again by
  `reap_expired()`, and again after each doubling of that wait, capped at `redispatch_max`. The task may only
  be waiting behind a long backlog, so the copies are claimed `only_if_dirty`: the first task to claim
  consumes the dirty mark, and every later copy finds nothing queued and does nothing (one Redis call); the
  doubling bounds the copies of one waiting key to about log2(backlog / redispatch_after). `retry_now()` (the
  admin control, and manual reconcile requests) sends a key stuck in "sent" at once.

- Sent and ready: with `max_sent` > 0, at most that many keys are sent and not yet claimed (the `dispatched`
  set). A key that becomes dirty beyond that stays *ready* (dirty, not processing, not sent), and `top_up()`
  (the controller's pump, and a draining task that stops) sends ready keys while fewer than `max_sent` wait. A
  worker that finished its key takes the longest-queued key not processing (`claim_next`, pop and claim in one
  script, with the release of the key it ran: `done_then_claim_next`; first come, first served, whether a task
  was sent for it or not) and runs it in the same task. A key taken so keeps its task's place under the cap until
  that task arrives, finds nothing queued and frees it (then drains in turn), so draining workers do not make the
  pump send a task per key. A burst costs a Celery message per batch instead of one per key, and never builds a
  broker backlog longer than `max_sent` (whose keys `reap_expired` would send again).
- Lingering: a draining worker with nothing left waits idle for the next key (`wait_for_key`): registered in
  `lingering` (until a deadline), blocked on the `wake` list. While idle lingerers outnumber the wake tokens, a key
  that becomes ready is held (no task sent) and a token pushed; the woken worker unregisters and claims the
  longest-queued key no task was sent for, in one script. At a steady trickle of changes, keys thus reach a worker
  without a Celery message. A lingerer killed while waiting lapses at its deadline; a key held for it meanwhile is
  ready, so `top_up` (the pump) sends it. `add(direct=True)` (a manual request) is never held: its task carries the
  request's trace. A lingering task holds its worker process, so a worker node lets at most `cap` of its processes
  linger at once (registered under the node's name; the runner passes its concurrency − 1): one stays free for the
  tasks the node is sent (a manual request, a key beyond the lingerers).

- `objects` (hash key → `<resourceVersion> <JSON>`): the object cache (`reconcilers.engine.objectcache`), of the
  reconciled kinds and the kinds they own. The controller writes it (`cache_objects`, `cache_prune`; with the keys
  those objects make dirty, `cache_and_add`: one round trip, the objects stored before the keys) and keeps
  `objects-live` set while its informers run (`cache_live`); `claim` and `claim_next` return the key's entry with
  the lease, `cached_child` a child's entry (only while `objects-live` is set), and `cache_refresh` moves an
  existing entry forward to what a worker's write returned. A version older than the one held is never stored.

Every state change is one Lua script (atomic). All keys live under `wq:{<name>}:` (one hash slot), so several
queues share a Redis. Times come from the injected `clock`, or from Redis `TIME` when none is given, so
leases compare consistently across hosts. Methods that return keys "to dispatch" leave the sending of the
Celery task to the caller (`reconcilers.engine.dispatch`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

_PARTS = ("dirty", "processing", "leases", "delayed", "failures", "bucket", "dispatched", "resent", "objects",
          "objects-live", "lingering", "wake")
_BLOCK_SLICE = 2.0  # seconds a blocking Redis call waits at most (below the client's socket timeout)
#: depth samples kept (one every DEPTH_SAMPLE_SECONDS in the controller: an hour)
DEPTH_HISTORY = 240

# KEYS: 1 dirty, 2 processing, 3 leases, 4 delayed, 5 failures, 6 bucket, 7 dispatched, 8 resent, 9 objects (the
# object cache, reconcilers.engine.objectcache: key -> '<resourceVersion> <JSON>'), 10 objects-live (set, with a
# time to live, while a controller's informers keep the cache: children are read from it only then), 11 lingering
# (sorted set lingerer -> until when: idle draining workers waiting for a key), 12 wake (list: a token per key held
# for a lingerer; a lingerer blocks on it). ARGV[1]: now,
# or < 0 for the Redis server's clock. Times are formatted with 6 decimals: Lua numbers returned to Redis truncate.
# RESEND and RESEND_MAX (the queue's redispatch_after and redispatch_max) are set per queue by the prologue.
_PRELUDE = """
local now = tonumber(ARGV[1])
if now < 0 then local t = redis.call('TIME'); now = tonumber(t[1]) + tonumber(t[2]) / 1000000 end
local function f(x) return string.format('%.6f', x) end
local function owner_of(key)
  local raw = redis.call('HGET', KEYS[2], key)
  if raw then return cjson.decode(raw) end
  return nil
end
local function sent(key)  -- key handed to the broker now: check that a worker claimed it after RESEND s
  redis.call('ZADD', KEYS[7], f(now + RESEND), key)
  redis.call('HDEL', KEYS[8], key)
  return 1
end
local function offer(key, direct)  -- a key ready for a worker: sent (1), unless an idle lingering worker waits
  -- without a wake token yet and not `direct` (2: held for it, a token wakes it) or MAX_SENT tasks wait already (2:
  -- it stays ready, taken by a worker draining the queue, or sent by top_up when fewer wait)
  local idle = direct and 0 or redis.call('ZCOUNT', KEYS[11], '(' .. f(now), '+inf')
  if idle > 0 and redis.call('LLEN', KEYS[12]) < idle then
    redis.call('LPUSH', KEYS[12], key)
    return 2
  end
  if MAX_SENT > 0 and redis.call('ZCARD', KEYS[7]) >= MAX_SENT then return 2 end
  return sent(key)
end
local function unlinger(lingerer)  -- a lingerer no longer waits; the tokens go when nobody does
  redis.call('ZREM', KEYS[11], lingerer)
  if redis.call('ZCARD', KEYS[11]) == 0 then redis.call('DEL', KEYS[12]) end
end
local function mark(key, at, direct)  -- make key dirty (queued at `at`); 1 when the caller must dispatch it now, 2
  -- when it waits ready (see offer), 0 when coalesced or processing
  if redis.call('ZSCORE', KEYS[1], key) then return 0 end
  redis.call('ZADD', KEYS[1], at or f(now), key)
  redis.call('ZREM', KEYS[4], key)
  if redis.call('HEXISTS', KEYS[2], key) == 1 then return 0 end
  return offer(key, direct)
end
local function mark_all(first)  -- mark ARGV[first..]: {the keys to dispatch now, the keys held ready}
  local sent, held = {}, {}
  for i = first, #ARGV do
    local m = mark(ARGV[i])
    if m == 1 then sent[#sent + 1] = ARGV[i] elseif m == 2 then held[#held + 1] = ARGV[i] end
  end
  return {sent, held}
end
local function waiting(limit, sent_too)  -- up to `limit` keys queued and not processing (and, unless `sent_too`,
  -- no task sent for them), the longest queued first
  local out = {}
  local scan = limit + redis.call('HLEN', KEYS[2]) + (sent_too and 0 or redis.call('ZCARD', KEYS[7]))
  for _, key in ipairs(redis.call('ZRANGE', KEYS[1], 0, scan - 1)) do
    if #out >= limit then break end
    if redis.call('HEXISTS', KEYS[2], key) == 0 and (sent_too or not redis.call('ZSCORE', KEYS[7], key)) then
      out[#out + 1] = key
    end
  end
  return out
end
local function take(key, owner, lease, keep_sent)  -- owner's lease on key (the caller checked nobody else holds
  -- one); `keep_sent`: a task sent for the key keeps its place under the cap until it arrives and finds nothing
  local cur = owner_of(key)
  local since = now
  if cur and cur.owner == owner then since = tonumber(cur.since) end
  local queued = redis.call('ZSCORE', KEYS[1], key) or (cur and cur.owner == owner and cur.queued) or f(now)
  redis.call('ZREM', KEYS[1], key); redis.call('ZREM', KEYS[4], key)
  if not keep_sent then redis.call('ZREM', KEYS[7], key); redis.call('HDEL', KEYS[8], key) end
  local expires = now + lease
  redis.call('HSET', KEYS[2], key, cjson.encode({owner = owner, since = f(since), expires = f(expires),
    queued = queued}))
  redis.call('ZADD', KEYS[3], f(expires), key)
  return {queued, f(since), f(expires), tonumber(redis.call('HGET', KEYS[5], key)) or 0}
end
local function cache_put(key, rv, body)  -- the object cache's entry for key, unless it holds a newer version
  -- (numeric resourceVersions compared; an opaque one replaces); body '' removes the entry
  if body == '' then redis.call('HDEL', KEYS[9], key); return 1 end
  local cur = redis.call('HGET', KEYS[9], key)
  if cur then
    local held = string.match(cur, '^(%d+) ')
    if held and string.match(rv, '^%d+$') and (#rv < #held or (#rv == #held and rv < held)) then return 0 end
  end
  redis.call('HSET', KEYS[9], key, rv .. ' ' .. body)
  return 1
end
local function delay(key, due)  -- the earlier of the new and any existing due time wins
  local cur = tonumber(redis.call('ZSCORE', KEYS[4], key))
  if cur and cur <= due then return cur end
  redis.call('ZADD', KEYS[4], f(due), key)
  return due
end
local function release(key, owner, forget, after, hold)  -- owner's lease on key let go (`forget`: its failures
  -- reset; `after`: queued again that many seconds later); 1 when it became dirty meanwhile and is sent, 2 when it
  -- waits ready (`hold`: for the caller's own drain, no task sent; top_up sends it if not), else 0
  if forget == '1' then redis.call('HDEL', KEYS[5], key) end
  if after ~= '' then delay(key, now + tonumber(after)) end
  local cur = owner_of(key)
  if not cur or cur.owner ~= owner then return 0 end
  redis.call('HDEL', KEYS[2], key); redis.call('ZREM', KEYS[3], key)
  if not redis.call('ZSCORE', KEYS[1], key) then return 0 end
  if hold == '1' then return 2 end
  return offer(key)
end
local function take_next(owner, lease, unsent)  -- owner's lease on the longest-queued key not processing (false:
  -- none); `unsent`: only a key no task was sent for (a lingerer leaves a task's key to that task)
  local key = waiting(1, not unsent)[1]
  if not key then return false end
  local got = take(key, owner, tonumber(lease), true)
  table.insert(got, 1, key)
  got[#got + 1] = redis.call('HGET', KEYS[9], key) or ''
  return got
end
"""

_SCRIPTS = {
    "now": "return f(now)",
    "add": "return mark(ARGV[2], nil, ARGV[3] == '1')",
    "add_many": "return mark_all(2)",
    "add_after": "return f(delay(ARGV[2], now + tonumber(ARGV[3])))",
    "add_rate_limited": """
local key, base, cap, qps, burst = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local n = redis.call('HINCRBY', KEYS[5], key, 1) - 1
local backoff = math.min(cap, base * 2 ^ math.min(n, 1023))
local wait = 0
if qps > 0 then
  local b = redis.call('HMGET', KEYS[6], 'tokens', 'ts')
  local tokens, ts = tonumber(b[1]) or burst, tonumber(b[2]) or now
  if now > ts then tokens = math.min(burst, tokens + (now - ts) * qps); ts = now end
  tokens = tokens - 1
  if tokens < 0 then wait = -tokens / qps end
  redis.call('HSET', KEYS[6], 'tokens', tostring(tokens), 'ts', f(ts))
end
local due = delay(key, now + math.max(backoff, wait))
return {f(due - now), n + 1}
""",
    "claim": """
local key, owner, lease = ARGV[2], ARGV[3], tonumber(ARGV[4])
if ARGV[5] == '1' and not redis.call('ZSCORE', KEYS[1], key) then  -- a duplicate task, or a drainer took the key
  redis.call('ZREM', KEYS[7], key); redis.call('HDEL', KEYS[8], key)  -- this task arrived: its place is free
  return 0
end
local cur = owner_of(key)
if cur and cur.owner ~= owner and tonumber(cur.expires) > now then
  if not redis.call('ZSCORE', KEYS[1], key) then redis.call('ZADD', KEYS[1], f(now), key) end
  return false
end
local got = take(key, owner, lease, false)
got[#got + 1] = redis.call('HGET', KEYS[9], key) or ''
return got
""",
    "claim_next": "return take_next(ARGV[2], ARGV[3])",
    "linger": """
redis.call('ZREMRANGEBYSCORE', KEYS[11], '-inf', f(now))
local group, cap = ARGV[4] or '', tonumber(ARGV[5] or '-1')
if cap >= 0 then  -- at most `cap` lingerers whose names start with `group` (one worker node's processes)
  local n = 0
  for _, other in ipairs(redis.call('ZRANGE', KEYS[11], 0, -1)) do
    if other ~= ARGV[2] and string.sub(other, 1, #group) == group then n = n + 1 end
  end
  if n >= cap then return 0 end
end
redis.call('ZADD', KEYS[11], f(now + tonumber(ARGV[3])), ARGV[2])
return 1
""",
    "unlinger_next": """
unlinger(ARGV[2])
if ARGV[3] == '' then return false end  -- the wait failed: no claim the caller would not run
return take_next(ARGV[3], ARGV[4], true)
""",
    "top_up": """
local out = {}
local room = tonumber(ARGV[2])
if MAX_SENT > 0 then room = math.min(room, MAX_SENT - redis.call('ZCARD', KEYS[7])) end
if room <= 0 then return out end
for _, key in ipairs(waiting(room, false)) do sent(key); out[#out + 1] = key end
return out
""",
    "renew": """
local key, owner = ARGV[2], ARGV[3]
local cur = owner_of(key)
if not cur or cur.owner ~= owner then return false end
cur.expires = f(now + tonumber(ARGV[4]))
redis.call('HSET', KEYS[2], key, cjson.encode(cur))
redis.call('ZADD', KEYS[3], cur.expires, key)
return cur.expires
""",
    "done": "return release(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])",
    "done_next": "release(ARGV[2], ARGV[3], ARGV[4], ARGV[5], '1')\nreturn take_next(ARGV[6], ARGV[7])",
    "cache_add": """
local n = tonumber(ARGV[2])
for i = 3, 2 + 3 * n, 3 do cache_put(ARGV[i], ARGV[i + 1], ARGV[i + 2]) end
return mark_all(3 + 3 * n)
""",
    "cache": """
local stored = 0
for i = 2, #ARGV, 3 do stored = stored + cache_put(ARGV[i], ARGV[i + 1], ARGV[i + 2]) end
return stored
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
    "release_due": """
local out = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', f(now), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due, 2 do
  redis.call('ZREM', KEYS[4], due[i])
  if mark(due[i], due[i + 1]) == 1 then table.insert(out, due[i]) end
end
return out
""",
    "reap_expired": """
local out = {}
local limit = tonumber(ARGV[2])
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', f(now), 'LIMIT', 0, limit)) do
  local cur = owner_of(key)
  if not cur then
    redis.call('ZREM', KEYS[3], key)
  elseif tonumber(cur.expires) > now then
    redis.call('ZADD', KEYS[3], cur.expires, key)
  else
    redis.call('HDEL', KEYS[2], key); redis.call('ZREM', KEYS[3], key)
    if not redis.call('ZSCORE', KEYS[1], key) then redis.call('ZADD', KEYS[1], f(now), key) end
    if offer(key) == 1 then table.insert(out, key) end
  end
end
local stale = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', f(now), 'LIMIT', 0, limit)
for _, key in ipairs(stale) do
  if redis.call('HEXISTS', KEYS[2], key) == 1 or not redis.call('ZSCORE', KEYS[1], key) then
    redis.call('ZREM', KEYS[7], key); redis.call('HDEL', KEYS[8], key)
  else  -- marked sent, never claimed: its task was lost (or waits in a backlog: the copy then finds nothing)
    local n = redis.call('HINCRBY', KEYS[8], key, 1)
    redis.call('ZADD', KEYS[7], f(now + math.min(RESEND_MAX, RESEND * 2 ^ math.min(n, 60))), key)
    table.insert(out, key)
  end
end
return out
""",
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
  local p = string.match(key, '^([^/]*/[^/]*/[^/]*)/') or ''
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
    "retry_now": """
local key = ARGV[2]
local was_delayed = redis.call('ZREM', KEYS[4], key) == 1
if was_delayed and mark(key) == 1 then return 1 end
if redis.call('ZSCORE', KEYS[1], key) and redis.call('HEXISTS', KEYS[2], key) == 0 then
  return sent(key)  -- queued, not processing: maybe stuck in "sent"; a copy is harmless (claimed only if dirty)
end
return 0
""",
}
# the pump's three steps (release_due, reap_expired, top_up) in one round trip, in that order
_SCRIPTS["pump"] = "".join(f"local function {op}()\n{_SCRIPTS[op]}end\n"
                           for op in ("release_due", "reap_expired", "top_up")) + """
local out = {}
for _, part in ipairs({release_due(), reap_expired(), top_up()}) do
  for _, key in ipairs(part) do out[#out + 1] = key end
end
return out
"""


class LingerRefused(Exception):
    """`WorkQueue.wait_for_key`: as many processes of the worker node as its cap linger already."""


@dataclass(frozen=True)
class Claim:
    """A held lease: the reconcile of `key` by `owner` may run until `lease_expires` (renew to extend)."""

    key: str
    owner: str
    queued_at: float  # when the key last became dirty (for workqueue_queue_duration_seconds)
    claimed_at: float
    lease_expires: float
    failures: int  # consecutive failures so far (the run's attempt number is failures + 1)
    cached: str = ""  # the object cache's entry for the key ('<resourceVersion> <JSON>', '' when none)


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


def _cache_args(entries: Iterable[tuple[str, tuple[str, str | bytes] | None]]) -> list[str | bytes]:
    """Object-cache entries as script arguments: key, resourceVersion, body ('' and '' remove the entry)."""
    args: list[str | bytes] = []
    for key, entry in entries:
        args.extend((key, *(entry if entry is not None else ("", ""))))
    return args


def _after(requeue_after: float | None) -> str:
    """A RequeueAfter as a script argument ('' for none)."""
    return "" if requeue_after is None else repr(max(0.0, float(requeue_after)))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class KindDepth:
    """One kind's share of the queue, for the workqueue gauges."""

    pending: int
    unfinished_seconds: float
    longest_running_seconds: float


class WorkQueue:
    """One named workqueue in Redis. Thread-safe and process-safe: all state lives in Redis."""

    def __init__(
        self,
        redis: redis.Redis,
        *,
        name: str = "opsconsole",
        lease_seconds: float = 30.0,
        backoff_base: float = 0.005,
        backoff_cap: float = 1000.0,
        bucket_qps: float = 10.0,
        bucket_burst: int = 100,
        redispatch_after: float = 5.0,
        redispatch_max: float | None = None,
        max_sent: int = 0,
        batch: int = 500,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`clock` None uses the Redis server's clock (consistent across hosts); tests inject a fake one.
        `bucket_qps` <= 0 disables the token bucket. `batch` bounds the keys one release/reap step moves.
        A key marked sent but not claimed within `redispatch_after` seconds is re-sent, then again after a wait
        doubling up to `redispatch_max` (None: no doubling, every `redispatch_after`). `max_sent` > 0 caps the
        keys sent and not yet claimed: a key that becomes ready beyond it is left for a draining worker
        (`claim_next`) or for `top_up`; 0 sends every ready key."""
        redispatch_max = redispatch_after if redispatch_max is None else redispatch_max
        if (lease_seconds <= 0 or backoff_base < 0 or backoff_cap < backoff_base or bucket_burst < 1 or batch < 1
                or redispatch_after <= 0 or redispatch_max < redispatch_after or max_sent < 0):
            raise ValueError("invalid workqueue parameters")
        self.redis = redis
        self.name = name
        self.lease_seconds = float(lease_seconds)
        self.backoff_base = float(backoff_base)
        self.backoff_cap = float(backoff_cap)
        self.bucket_qps = float(bucket_qps)
        self.bucket_burst = int(bucket_burst)
        self.redispatch_after = float(redispatch_after)
        self.redispatch_max = float(redispatch_max)
        self.max_sent = int(max_sent)
        self.batch = int(batch)
        self.clock = clock
        self.prefix = f"wq:{{{name}}}:"
        self.keys = [self.prefix + part for part in _PARTS]
        prologue = (f"local RESEND, RESEND_MAX, MAX_SENT = {self.redispatch_after!r}, {self.redispatch_max!r}, "
                    f"{self.max_sent}\n")
        self._scripts = {op: redis.register_script(prologue + _PRELUDE + src) for op, src in _SCRIPTS.items()}

    def _run(self, op: str, *args: object) -> Any:
        now = self.clock() if self.clock is not None else -1.0
        return self._scripts[op](keys=self.keys, args=[repr(float(now)), *args])

    def now(self) -> float:
        """The queue's current time (the injected clock or the Redis server's)."""
        return float(self._run("now"))

    def add(self, key: str, *, direct: bool = False) -> bool:
        """Mark key dirty. True: newly queued, the caller must dispatch a task for it. False: coalesced with a
        pending add, or the key is processing (done() re-queues it once), or held ready (for a lingering worker,
        or beyond the cap). Supersedes a delayed retry. `direct`: never held for a lingering worker (a manual
        request: its task carries the request's trace to the run)."""
        return self._run("add", key, "1" if direct else "0") == 1

    def add_many(self, keys: list[str]) -> list[str]:
        """`add` for several keys in one atomic step (one round trip). Returns the keys newly queued and sent, in
        order: the caller must dispatch those (`add_many_queued` tells the ones held ready too)."""
        return self.add_many_queued(keys)[0]

    def add_many_queued(self, keys: list[str]) -> tuple[list[str], list[str]]:
        """`add_many`, returning (the keys newly queued and sent: dispatch those, the keys newly queued and held
        ready beyond `max_sent`)."""
        if not keys:
            return [], []
        sent, held = self._run("add_many", *keys)
        return [_text(k) for k in sent], [_text(k) for k in held]

    def add_after(self, key: str, delay: float) -> None:
        """Queue key after delay seconds (RequeueAfter, TemporaryError); an earlier due time already set wins."""
        self._run("add_after", key, repr(max(0.0, float(delay))))

    def add_rate_limited(self, key: str) -> float:
        """Record a failure and delay key by max(per-key backoff base·2^n capped, token bucket wait).
        Returns the delay in seconds until the key is released."""
        delay, _ = self._run("add_rate_limited", key, repr(self.backoff_base), repr(self.backoff_cap),
                             repr(self.bucket_qps), str(self.bucket_burst))
        return float(delay)

    def forget(self, key: str) -> None:
        """Reset key's failure count (after a success)."""
        self.redis.hdel(self.keys[4], key)

    def failures(self, key: str) -> int:
        """Consecutive failures recorded for key."""
        return int(self.redis.hget(self.keys[4], key) or 0)

    def claim(self, key: str, owner: str, *, only_if_dirty: bool = False) -> Claim | None:
        """Take key's lease for owner. None when another owner holds an unexpired lease (the key then stays
        dirty, so that owner's done() re-queues it), or, `only_if_dirty`, when the key is not queued (another
        task already claimed what this one was sent for). An expired lease is taken over."""
        got = self._run("claim", key, owner, repr(self.lease_seconds), "1" if only_if_dirty else "0")
        if not got:
            return None
        queued, since, expires, failures, cached = got
        return Claim(key, owner, float(queued), float(since), float(expires), int(failures), _text(cached))

    def claim_next(self, owner: str) -> Claim | None:
        """Take the lease of the longest-queued key not processing for owner (a task sent for it then finds
        nothing): how a worker drains the queue after its own key. None when no key waits."""
        return self._next_claim(owner, self._run("claim_next", owner, repr(self.lease_seconds)))

    def done_then_claim_next(self, key: str, owner: str, next_owner: str, *, forget: bool = False,
                             requeue_after: float | None = None) -> Claim | None:
        """`done(key, owner, hold=True)` then `claim_next(next_owner)`, in one round trip: how a draining worker
        goes from one key to the next."""
        return self._next_claim(next_owner, self._run("done_next", key, owner, "1" if forget else "0",
                                                      _after(requeue_after), next_owner, repr(self.lease_seconds)))

    @staticmethod
    def _next_claim(owner: str, got: Any) -> Claim | None:
        if not got:
            return None
        key, queued, since, expires, failures, cached = got
        return Claim(_text(key), owner, float(queued), float(since), float(expires), int(failures), _text(cached))

    def wait_for_key(self, lingerer: str, owner: str, timeout: float, *, group: str = "",
                     cap: int = -1) -> Claim | None:
        """Linger idle for up to `timeout` seconds: registered as `group` + `lingerer`, blocked on the wake list, so
        that a key becoming ready is held for it (no task sent) and wakes it; then, in one script, unregistered and
        `claim_next(owner)`, of a key no task was sent for (one that was is left to its task). Killed while waiting,
        the registration lapses `timeout` + 1 s later and `top_up` sends what was held. `cap` >= 0: at most that
        many lingerers of the `group` (a worker node's processes) wait at once; beyond it, `LingerRefused` at once
        (nothing registered: the caller's process stays free for the tasks its node is sent)."""
        lingerer = group + lingerer
        if not self._run("linger", lingerer, repr(float(timeout) + 1.0), group, str(int(cap))):
            raise LingerRefused(f"{cap} processes of {group!r} linger already")
        try:
            end = time.monotonic() + float(timeout)
            while (left := end - time.monotonic()) > 0:  # in slices: redis-py's socket timeout (5 s) ends a longer one
                if self.redis.blpop([self.keys[11]], timeout=max(0.01, min(left, _BLOCK_SLICE))) is not None:
                    break
        except Exception:
            self._run("unlinger_next", lingerer, "", "")
            raise
        return self._next_claim(owner, self._run("unlinger_next", lingerer, owner, repr(self.lease_seconds)))

    def top_up(self, limit: int | None = None) -> list[str]:
        """Send ready keys (the longest queued first) while fewer than `max_sent` sent keys wait for a worker, at
        most `limit` (the batch size). Returns the keys to dispatch."""
        return [_text(k) for k in self._run("top_up", str(self.batch if limit is None else limit))]

    def renew(self, key: str, owner: str) -> bool:
        """Extend owner's lease on key by lease_seconds from now. False: the lease is no longer owner's."""
        return bool(self._run("renew", key, owner, repr(self.lease_seconds)))

    def done(self, key: str, owner: str, *, forget: bool = False, requeue_after: float | None = None,
             hold: bool = False) -> bool:
        """Release owner's lease (and, in the same round trip, `forget`: reset key's failure count;
        `requeue_after`: `add_after(key, requeue_after)`). True: the key became dirty meanwhile (and could be
        sent), the caller must dispatch it. `hold`: a key that became dirty is left ready without a task (the
        caller drains the queue next: it, or any worker draining, claims it; `top_up` sends it otherwise), and
        the answer is False."""
        return self._run("done", key, owner, "1" if forget else "0", _after(requeue_after), "1" if hold else "0") == 1

    def cache_and_add(self, entries: dict[str, tuple[str, str | bytes] | None], keys: list[str],
                      chunk: int = 500) -> tuple[list[str], list[str]]:
        """`cache_objects` then `add_many_queued`, in one round trip when the objects fit in one `chunk` (the
        controller's batch: its objects and the keys they make dirty); the objects are stored first, so a worker
        that claims one of these keys finds its object."""
        if len(entries) > chunk:
            self.cache_objects(entries, chunk)
            return self.add_many_queued(keys)
        sent, held = self._run("cache_add", str(len(entries)), *_cache_args(entries.items()), *keys)
        return [_text(k) for k in sent], [_text(k) for k in held]

    def cache_objects(self, entries: dict[str, tuple[str, str | bytes] | None], chunk: int = 500) -> int:
        """Store objects in the object cache (`reconcilers.engine.objectcache`), key → (resourceVersion, JSON), or
        remove them (None); a version older than the one stored is not stored. One round trip per `chunk`
        entries. Returns how many entries changed."""
        items = list(entries.items())
        changed = 0
        for start in range(0, len(items), chunk):
            changed += int(self._run("cache", *_cache_args(items[start:start + chunk])))
        return changed

    def cache_prune(self, prefix: str, present: set[str] | list[str]) -> int:
        """Remove the object cache's entries whose key starts with `prefix` (a kind's `group/version/plural/`) and
        is not in `present` (the keys a fresh list returned). Returns how many went."""
        return int(self._run("cache_prune", prefix, *present))

    def cached(self, key: str) -> str:
        """The object cache's entry for key ('<resourceVersion> <JSON>', '' when none)."""
        return _text(self.redis.hget(self.keys[8], key) or b"")

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
        return _text(self._run("cache_child", key) or b"")

    def release_due(self) -> list[str]:
        """One step: move due delayed keys into the queue. Returns the keys to dispatch."""
        return [_text(k) for k in self._run("release_due", str(self.batch))]

    def reap_expired(self) -> list[str]:
        """One step: re-queue keys whose lease expired (killed worker) and dirty keys marked sent but not claimed
        within redispatch_after (doubling per copy, up to redispatch_max): their task was lost, or waits in a
        backlog. Returns the keys to dispatch."""
        keys = self._run("reap_expired", str(self.batch))
        return list(dict.fromkeys(_text(k) for k in keys))

    def pump(self) -> list[str]:
        """`release_due`, `reap_expired` and `top_up` (the controller's pump step) in one round trip. Returns the
        keys to dispatch."""
        return list(dict.fromkeys(_text(k) for k in self._run("pump", str(self.batch))))

    def snapshot(self, limit: int = 1000) -> QueueSnapshot:
        """The queue's state for the console/API; lists hold at most `limit` items each (counts are exact)."""
        now, depth, nproc, ndelayed, proc, pending, delayed, fails = self._run("snapshot", str(limit))
        processing = []
        for i in range(0, len(proc), 2):
            raw, dirty = _text(proc[i + 1]).rsplit("|", 1)
            entry = json.loads(raw)
            processing.append(ProcessingItem(_text(proc[i]), entry["owner"], float(entry["since"]),
                                             float(entry["expires"]), dirty == "1"))
        return QueueSnapshot(
            name=self.name, now=float(now), depth=int(depth), processing_count=int(nproc),
            delayed_count=int(ndelayed),
            pending=[PendingItem(_text(pending[i]), float(pending[i + 1])) for i in range(0, len(pending), 2)],
            processing=sorted(processing, key=lambda p: (p.since, p.key)),
            backing_off=[DelayedItem(_text(delayed[i]), int(fails[i // 2]), float(delayed[i + 1]))
                         for i in range(0, len(delayed), 2)],
        )

    def depths(self) -> dict[str, KindDepth]:
        """Per kind (the key prefix `group/version/plural`): keys waiting (dirty, not processing), and the
        seconds the running reconciles have run, summed and longest. Counts in Redis and returns only the
        sums, so the controller's metrics cost the same with 10 keys queued or 10 000."""
        flat = self._run("depths")
        return {_text(flat[i]): KindDepth(int(flat[i + 1]), float(flat[i + 2]), float(flat[i + 3]))
                for i in range(0, len(flat), 4)}

    def retry_now(self, key: str) -> bool:
        """Admin (and manual requests): release a delayed/backing-off key now, or re-send a key queued but not
        processing (it may be stuck in "sent": its task lost). True: the caller must dispatch it (a copy of a task
        that was only waiting finds nothing to claim). False: not queued, or processing (done() re-sends it)."""
        return self._run("retry_now", key) == 1

    def reset_backoff(self, key: str) -> None:
        """Admin: reset key's failure count so its next failure backs off from the base again. A retry
        already scheduled keeps its time (use retry_now to move it)."""
        self.forget(key)

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
            at, _, depth = _text(item).partition(" ")
            try:
                out.append((float(at), int(depth)))
            except ValueError:
                continue
        return out[::-1]

    def clear(self) -> None:
        """Delete every Redis key of this queue (tests, admin)."""
        self.redis.delete(*self.keys, self.prefix + "depth-history")
