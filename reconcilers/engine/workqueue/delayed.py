"""The delayed side of the work queue: RequeueAfter, retry back-off and the admin's retry now.

- `delayed` (sorted set key → due time): RequeueAfter and retry backoff, released by `release_due()`; never Celery
  ETA/countdown, which the Redis broker redelivers after its visibility timeout.
- `failures` (hash key → count) and `bucket` (hash tokens/ts): controller-runtime's default rate limiter,
  MaxOf(per-key exponential backoff base·2^n capped, overall token bucket qps/burst).
"""

from __future__ import annotations

from reconcilers.engine.workqueue.core import QueueCore
from reconcilers.engine.workqueue.lua import text

SCRIPTS = {
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
    "release_due": """
local out = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', f(now), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due, 2 do
  redis.call('ZREM', KEYS[4], due[i])
  if mark(due[i], due[i + 1]) == 1 then table.insert(out, due[i]) end
end
return out
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


class Delayed(QueueCore):
    """Delaying keys (RequeueAfter, back-off), releasing them when due, and the failure counts."""

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

    def release_due(self) -> list[str]:
        """One step: move due delayed keys into the queue. Returns the keys to dispatch."""
        return [text(k) for k in self._run("release_due", str(self.batch))]

    def retry_now(self, key: str) -> bool:
        """Admin (and manual requests): release a delayed/backing-off key now, or re-send a key queued but not
        processing (it may be stuck in "sent": its task lost). True: the caller must dispatch it (a copy of a task
        that was only waiting finds nothing to claim). False: not queued, or processing (done() re-sends it)."""
        return self._run("retry_now", key) == 1

    def reset_backoff(self, key: str) -> None:
        """Admin: reset key's failure count so its next failure backs off from the base again. A retry
        already scheduled keeps its time (use retry_now to move it)."""
        self.forget(key)
