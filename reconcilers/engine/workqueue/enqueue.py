"""Making keys dirty and sending the ready ones: the work queue's entrance.

- `dirty` (sorted set key → queued_at): keys that need a reconcile. An add of a key already dirty is coalesced; an
  add of a key being processed only marks it dirty, and `done()` re-queues it exactly once.
- Sent and ready: with `max_sent` > 0, at most that many keys are sent and not yet claimed (the `dispatched` set).
  A key that becomes dirty beyond that stays *ready* (dirty, not processing, not sent), and `top_up()` (the
  controller's pump, and a draining task that stops) sends ready keys while fewer than `max_sent` wait. A burst
  costs a Celery message per batch instead of one per key, and never builds a broker backlog longer than
  `max_sent` (whose keys `reap_expired` would send again).

Methods that return keys "to dispatch" leave the sending of the Celery task to the caller
(`reconcilers.engine.dispatch`).
"""

from __future__ import annotations

from reconcilers.engine.workqueue.core import QueueCore
from reconcilers.engine.workqueue.lua import text

SCRIPTS = {
    "add": "return mark(ARGV[2], nil, ARGV[3] == '1')",
    "add_many": "return mark_all(2)",
    "note": """
local bound = tonumber(ARGV[2])
for i = 3, #ARGV, 2 do note(ARGV[i], ARGV[i + 1], bound) end
return 1
""",
    "top_up": """
local out = {}
local room = tonumber(ARGV[2])
if MAX_SENT > 0 then room = math.min(room, MAX_SENT - redis.call('ZCARD', KEYS[7])) end
if room <= 0 then return out end
for _, key in ipairs(waiting(room, false)) do sent(key); out[#out + 1] = key end
return out
""",
}


class Enqueue(QueueCore):
    """Adding keys, and sending the ready ones under the cap."""

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
        return [text(k) for k in sent], [text(k) for k in held]

    def note(self, why: dict[str, str], bound: int = 8) -> None:
        """Append triggers to keys' `why` entries (key → `reconcilers.engine.triggers.encode`d), at most
        `bound` kept per key, the rest counted: one round trip. A key's claim takes its entry, so note before
        `add`: a worker that claims the key finds them."""
        if why:
            self._run("note", str(bound), *[part for pair in why.items() for part in pair])

    def top_up(self, limit: int | None = None) -> list[str]:
        """Send ready keys (the longest queued first) while fewer than `max_sent` sent keys wait for a worker, at
        most `limit` (the batch size). Returns the keys to dispatch."""
        return [text(k) for k in self._run("top_up", str(self.batch if limit is None else limit))]
