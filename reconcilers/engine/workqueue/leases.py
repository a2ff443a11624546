"""Keeping a lease alive, and finding the keys whose lease lapsed or whose task was lost.

A worker `renew()`s its lease during a long reconcile (every lease_seconds / 3 or so: a lease that lapses while its
owner still runs lets another worker in; `reconcilers.engine.lease_renewal` does it). A lease that expires (worker
killed) is re-queued by `reap_expired()`.

`dispatched` (sorted set key → when its "sent" mark is due for a check) and `resent` (hash key → copies re-sent): a
key is marked sent before its task is handed to the broker, so a process killed in between (the controller during a
burst, a worker between `done()` and the send) leaves a key marked sent whose task never was. A dirty key not
claimed within `redispatch_after` (a few seconds) is dispatched again by `reap_expired()`, and again after each
doubling of that wait, capped at `redispatch_max`. The task may only be waiting behind a long backlog, so the copies
are claimed `only_if_dirty`: the first task to claim consumes the dirty mark, and every later copy finds nothing
queued and does nothing (one Redis call); the doubling bounds the copies of one waiting key to about
log2(backlog / redispatch_after). `retry_now()` (the admin control, and manual reconcile requests) sends a key stuck
in "sent" at once.
"""

from __future__ import annotations

from reconcilers.engine.workqueue.core import QueueCore
from reconcilers.engine.workqueue.lua import text

SCRIPTS = {
    "renew": """
local key, owner = ARGV[2], ARGV[3]
local cur = owner_of(key)
if not cur or cur.owner ~= owner then return false end
cur.expires = f(now + tonumber(ARGV[4]))
redis.call('HSET', KEYS[2], key, cjson.encode(cur))
redis.call('ZADD', KEYS[3], cur.expires, key)
return cur.expires
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
}


class Leases(QueueCore):
    """Renewing a lease; re-queueing lapsed leases and re-sending lost tasks."""

    def renew(self, key: str, owner: str) -> bool:
        """Extend owner's lease on key by lease_seconds from now. False: the lease is no longer owner's."""
        return bool(self._run("renew", key, owner, repr(self.lease_seconds)))

    def reap_expired(self) -> list[str]:
        """One step: re-queue keys whose lease expired (killed worker) and dirty keys marked sent but not claimed
        within redispatch_after (doubling per copy, up to redispatch_max): their task was lost, or waits in a
        backlog. Returns the keys to dispatch."""
        keys = self._run("reap_expired", str(self.batch))
        return list(dict.fromkeys(text(k) for k in keys))
