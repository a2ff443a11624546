"""The work queue's Redis layout and the Lua every one of its scripts starts with.

Every state change of the queue is one Lua script (atomic). All of a queue's keys live under `wq:{<name>}:` (one
hash slot), so several queues share a Redis; `PARTS` names them in the order the scripts see them as KEYS. The
prelude holds the functions several scripts share: marking a key dirty (`mark`, `mark_all`), offering a ready key
to a worker (`offer`, `sent`), taking and releasing a lease (`take`, `take_next`, `release`), delaying a key
(`delay`), the object cache's store (`cache_put`) and the lingerers' bookkeeping (`unlinger`).
"""

from __future__ import annotations

from collections.abc import Iterable

PARTS = ("dirty", "processing", "leases", "delayed", "failures", "bucket", "dispatched", "resent", "objects",
         "objects-live", "lingering", "wake", "why")

# KEYS: 1 dirty, 2 processing, 3 leases, 4 delayed, 5 failures, 6 bucket, 7 dispatched, 8 resent, 9 objects (the
# object cache, reconcilers.engine.objectcache: key -> '<resourceVersion> <JSON>'), 10 objects-live (set, with a
# time to live, while a controller's informers keep the cache: children are read from it only then), 11 lingering
# (sorted set lingerer -> until when: idle draining workers waiting for a key), 12 wake (list: a token per key held
# for a lingerer; a lingerer blocks on it), 13 why (hash key -> the triggers that enqueued it,
# reconcilers.engine.triggers: '<dropped>\n' then one JSON per line, at most a bound of them; appended by `note`,
# taken with the claim). ARGV[1]: now, or < 0 for the Redis server's clock. Times are formatted with 6 decimals: Lua
# numbers returned to Redis truncate.
# RESEND and RESEND_MAX (the queue's redispatch_after and redispatch_max) are set per queue by the prologue.
PRELUDE = """
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
local function note(key, lines, bound)  -- append triggers ('<dropped>\\n' then JSON lines) to key's why entry,
  -- at most `bound` kept
  local cur = redis.call('HGET', KEYS[13], key)
  local dropped, kept, body = 0, 0, ''
  if cur then
    local head, rest = string.match(cur, '^(%d+)\\n(.*)$')
    if head then
      dropped, body = tonumber(head), rest
      local _, lines_held = string.gsub(rest, '\\n', '')
      kept = lines_held
    end
  end
  local add_head, add_rest = string.match(lines, '^(%d+)\\n(.*)$')
  if add_head then dropped, lines = dropped + tonumber(add_head), add_rest end
  for line in string.gmatch(lines, '[^\\n]+') do
    if kept < bound then body = body .. line .. '\\n'; kept = kept + 1 else dropped = dropped + 1 end
  end
  redis.call('HSET', KEYS[13], key, dropped .. '\\n' .. body)
end
local function why(key)  -- key's triggers, taken (with its claim)
  local raw = redis.call('HGET', KEYS[13], key)
  if not raw then return '' end
  redis.call('HDEL', KEYS[13], key)
  return raw
end
local function cache_put(key, rv, body, cap)  -- the object cache's entry for key, unless it holds a newer version
  -- (numeric resourceVersions compared; an opaque one replaces): 1 stored, 0 not; body '' removes the entry. `cap`
  -- (> 0): a key with no entry yet is not stored while the cache holds that many (2: left out, read with a GET)
  if body == '' then redis.call('HDEL', KEYS[9], key); return 1 end
  local cur = redis.call('HGET', KEYS[9], key)
  if cur then
    local held = string.match(cur, '^(%d+) ')
    if held and string.match(rv, '^%d+$') and (#rv < #held or (#rv == #held and rv < held)) then return 0 end
  elseif cap and tonumber(cap) > 0 and redis.call('HLEN', KEYS[9]) >= tonumber(cap) then
    return 2
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
  got[#got + 1] = why(key)
  return got
end
"""


def prologue(redispatch_after: float, redispatch_max: float, max_sent: int) -> str:
    """The constants a queue sets before the prelude: RESEND, RESEND_MAX (its redispatch_after and redispatch_max)
    and MAX_SENT."""
    return f"local RESEND, RESEND_MAX, MAX_SENT = {redispatch_after!r}, {redispatch_max!r}, {max_sent}\n"


def text(value: bytes | str) -> str:
    """A Redis reply as text."""
    return value.decode() if isinstance(value, bytes) else value


def after_arg(requeue_after: float | None) -> str:
    """A RequeueAfter as a script argument ('' for none)."""
    return "" if requeue_after is None else repr(max(0.0, float(requeue_after)))


def cache_args(entries: Iterable[tuple[str, tuple[str, str | bytes] | None]]) -> list[str | bytes]:
    """Object-cache entries as script arguments: key, resourceVersion, body ('' and '' remove the entry)."""
    args: list[str | bytes] = []
    for key, entry in entries:
        args.extend((key, *(entry if entry is not None else ("", ""))))
    return args
