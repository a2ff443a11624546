"""The work queue's parameters, its Redis keys and how it runs a script: the base every room of the queue builds on.

Times come from the injected `clock`, or from Redis `TIME` when none is given, so leases compare consistently across
hosts. The scripts a queue registers are its class's `SCRIPTS` (`reconcilers.engine.workqueue.queue.WorkQueue`
gathers every room's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import redis

from reconcilers.engine.workqueue.lua import PARTS, PRELUDE, prologue

#: the script every queue has: the queue's time
SCRIPTS = {"now": "return f(now)"}


class QueueCore:
    """One named workqueue in Redis: its parameters, keys and scripts. Thread-safe and process-safe: all state lives
    in Redis."""

    SCRIPTS: ClassVar[dict[str, str]] = SCRIPTS

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
        self.keys = [self.prefix + part for part in PARTS]
        head = prologue(self.redispatch_after, self.redispatch_max, self.max_sent)
        self._scripts = {op: redis.register_script(head + PRELUDE + src) for op, src in self.SCRIPTS.items()}

    def _run(self, op: str, *args: object) -> Any:
        now = self.clock() if self.clock is not None else -1.0
        return self._scripts[op](keys=self.keys, args=[repr(float(now)), *args])

    def now(self) -> float:
        """The queue's current time (the injected clock or the Redis server's)."""
        return float(self._run("now"))

    def epoch(self, candidate: str) -> str:
        """The queue's epoch: `candidate`, written when the queue has none, else the one it has. Redis keeps it as
        long as it keeps the queue's state; a Redis restarted without persistence, or flushed, has lost it, so a
        controller that sees the epoch change knows that everything the queue held is gone (`clear` keeps it: the
        queue emptied on purpose lost nothing anyone waits for)."""
        key = self.prefix + "epoch"
        pipe = self.redis.pipeline()
        pipe.set(key, candidate, nx=True)
        pipe.get(key)
        _, value = pipe.execute()
        return value.decode() if isinstance(value, bytes) else str(value or "")

    def clear(self) -> None:
        """Delete every Redis key of this queue (tests, admin)."""
        self.redis.delete(*self.keys, self.prefix + "depth-history")
