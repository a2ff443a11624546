"""Claiming a key's lease and letting it go: one reconcile per key at a time.

`processing` (hash key → JSON owner/since/expires/queued) and `leases` (sorted set key → lease expiry): a worker
`claim()`s the key's lease, `renew()`s it during a long reconcile (`reconcilers.engine.workqueue.leases`) and
releases it with `done()`. A worker that finished its key takes the longest-queued key not processing
(`claim_next`, pop and claim in one script, with the release of the key it ran: `done_then_claim_next`; first come,
first served, whether a task was sent for it or not) and runs it in the same task. A key taken so keeps its task's
place under the cap until that task arrives, finds nothing queued and frees it (then drains in turn), so draining
workers do not make the pump send a task per key. `claim` and `claim_next` return the key's entry of the object
cache with the lease, and take the key's triggers (`why`, appended by `Enqueue.note`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconcilers.engine.workqueue.core import QueueCore
from reconcilers.engine.workqueue.lua import after_arg, text

SCRIPTS = {
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
got[#got + 1] = why(key)
return got
""",
    "claim_next": "return take_next(ARGV[2], ARGV[3])",
    "done": "return release(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])",
    "done_next": "release(ARGV[2], ARGV[3], ARGV[4], ARGV[5], '1')\nreturn take_next(ARGV[6], ARGV[7])",
}


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
    why: str = ""  # the triggers that enqueued the key since its last claim (reconcilers.engine.triggers.decode)


class Claims(QueueCore):
    """Claiming a key (or the next one waiting) and releasing it."""

    def claim(self, key: str, owner: str, *, only_if_dirty: bool = False) -> Claim | None:
        """Take key's lease for owner. None when another owner holds an unexpired lease (the key then stays
        dirty, so that owner's done() re-queues it), or, `only_if_dirty`, when the key is not queued (another
        task already claimed what this one was sent for). An expired lease is taken over."""
        got = self._run("claim", key, owner, repr(self.lease_seconds), "1" if only_if_dirty else "0")
        if not got:
            return None
        queued, since, expires, failures, cached, why = got
        return Claim(key, owner, float(queued), float(since), float(expires), int(failures), text(cached),
                     text(why))

    def claim_next(self, owner: str) -> Claim | None:
        """Take the lease of the longest-queued key not processing for owner (a task sent for it then finds
        nothing): how a worker drains the queue after its own key. None when no key waits."""
        return self._next_claim(owner, self._run("claim_next", owner, repr(self.lease_seconds)))

    def done_then_claim_next(self, key: str, owner: str, next_owner: str, *, forget: bool = False,
                             requeue_after: float | None = None) -> Claim | None:
        """`done(key, owner, hold=True)` then `claim_next(next_owner)`, in one round trip: how a draining worker
        goes from one key to the next."""
        return self._next_claim(next_owner, self._run("done_next", key, owner, "1" if forget else "0",
                                                      after_arg(requeue_after), next_owner, repr(self.lease_seconds)))

    @staticmethod
    def _next_claim(owner: str, got: Any) -> Claim | None:
        if not got:
            return None
        key, queued, since, expires, failures, cached, why = got
        return Claim(text(key), owner, float(queued), float(since), float(expires), int(failures), text(cached),
                     text(why))

    def done(self, key: str, owner: str, *, forget: bool = False, requeue_after: float | None = None,
             hold: bool = False) -> bool:
        """Release owner's lease (and, in the same round trip, `forget`: reset key's failure count;
        `requeue_after`: `add_after(key, requeue_after)`). True: the key became dirty meanwhile (and could be
        sent), the caller must dispatch it. `hold`: a key that became dirty is left ready without a task (the
        caller drains the queue next: it, or any worker draining, claims it; `top_up` sends it otherwise), and
        the answer is False."""
        return self._run("done", key, owner, "1" if forget else "0", after_arg(requeue_after),
                         "1" if hold else "0") == 1
