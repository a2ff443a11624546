"""Lingering: a draining worker with nothing left waits idle for the next key.

`wait_for_key` registers the worker in `lingering` (until a deadline) and blocks on the `wake` list. While idle
lingerers outnumber the wake tokens, a key that becomes ready is held (no task sent) and a token pushed; the woken
worker unregisters and claims the longest-queued key no task was sent for, in one script. At a steady trickle of
changes, keys thus reach a worker without a Celery message. A lingerer killed while waiting lapses at its deadline;
a key held for it meanwhile is ready, so `top_up` (the pump) sends it. `add(direct=True)` (a manual request) is
never held: its task carries the request's trace. A lingering task holds its worker process, so a worker node lets
at most `cap` of its processes linger at once (registered under the node's name; the runner passes its
concurrency − 1): one stays free for the tasks the node is sent (a manual request, a key beyond the lingerers).
"""

from __future__ import annotations

import time

from reconcilers.engine.workqueue.claims import Claim, Claims

_BLOCK_SLICE = 2.0  # seconds a blocking Redis call waits at most (below the client's socket timeout)

SCRIPTS = {
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
}


class LingerRefused(Exception):
    """`WorkQueue.wait_for_key`: as many processes of the worker node as its cap linger already."""


class Lingering(Claims):
    """Waiting idle for the next key, woken by the key itself."""

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
