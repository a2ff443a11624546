"""What the controller hands the workqueue: the objects for the object cache and the keys to reconcile (one round
trip when both defaults are used), the pump of delayed and expired keys, the object cache's prune and liveness.

While the workqueue (Redis) cannot be reached, enqueues and pumps back off exponentially (`QUEUE_BACKOFF_MIN`
doubling to `QUEUE_BACKOFF_MAX`) and the keys are kept in the handoff: the loop neither spins nor logs a traceback
per step. When it answers again `resync_now` is set: a Redis that restarted without persistence lost every queued
key, and nothing else would bring them back before the next resync (hours away by default). A restart too quick
for any call to fail is caught by the queue's epoch (`WorkQueue.epoch`), read with the pump every
`EPOCH_CHECK_SECONDS`: a value Redis keeps as long as it keeps the queue, so a new one means the queue was lost.

The keys' triggers (`reconcilers.engine.triggers`) are noted in the workqueue just before the keys are added (one
round trip per batch, `note`), each marked `loop` when the same trigger enqueued the same key more than
`triggers.LOOP_PER_MINUTE` times this minute (the run records the anomaly), and counted in
opsconsole_reconcile_triggers_total.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from reconcilers.engine import metrics, triggers
from reconcilers.engine.controller.gauges import controller_of, count_add
from reconcilers.engine.controller.handoff import Handoff, Why
from reconcilers.engine.controller.kindmap import KindId

log = logging.getLogger(__name__)

#: the pause before the next enqueue or pump after one failed (the workqueue's Redis away): doubling, capped
QUEUE_BACKOFF_MIN = 0.1
QUEUE_BACKOFF_MAX = 5.0
#: how often the queue's epoch is read (a Redis that lost the queue unnoticed is resynced within this)
EPOCH_CHECK_SECONDS = 2.0

Objects = dict[str, dict[str, Any] | None]


class QueueFeed:
    """The controller's side of the workqueue, with its backoff (see the module docstring). `cache_and_enqueue`
    (None: separately) writes the objects and enqueues the keys of one batch in one round trip. `enqueue` is the
    one-key callable a test passed (None: batched), kept for the tests that read what it recorded."""

    def __init__(self, handoff: Handoff, *, enqueue_many: Callable[[list[str]], list[str]],
                 cache_write: Callable[[Objects], Any],
                 cache_and_enqueue: Callable[[Objects, list[str]], list[str]] | None,
                 pump: Callable[[], int], cache_prune: Callable[[str, list[str]], Any],
                 cache_live: Callable[[float | None], Any], names: dict[KindId, str], clock: Callable[[], float],
                 enqueue: Callable[[str], bool] | None = None,
                 epoch: Callable[[str], str] | None = None,
                 note: Callable[[dict[str, str]], Any] | None = None,
                 loops: triggers.LoopCounter | None = None) -> None:
        self.handoff, self.names, self.clock, self.enqueue = handoff, names, clock, enqueue
        self.enqueue_many, self.cache_write, self.cache_and_enqueue = enqueue_many, cache_write, cache_and_enqueue
        self.pump, self.cache_prune, self.cache_live = pump, cache_prune, cache_live
        self.backoff = 0.0  # > 0 while the workqueue fails: the current pause
        self.retry_at = -float("inf")  # no enqueue or pump before this
        self.resync_now = False  # set when the workqueue answers again after failing
        self.enqueued = 0  # keys handed to the workqueue (tests and logs)
        self.epoch = epoch  # WorkQueue.epoch (None: not checked)
        self.epoch_seen: str | None = None
        self.note = note  # WorkQueue.note: the keys' triggers (None: not kept)
        self.loops = loops or triggers.LoopCounter()
        self._next_epoch = -float("inf")

    def failed(self, what: str, exc: Exception) -> None:
        """A workqueue call failed: pause enqueues and pumps (exponential backoff); the traceback once per outage."""
        first = self.backoff == 0.0
        self.backoff = min(QUEUE_BACKOFF_MAX, max(QUEUE_BACKOFF_MIN, self.backoff * 2))
        self.retry_at = self.clock() + self.backoff
        log.warning("controller: %s failed (%s: %s); %d keys kept, retrying in %.1fs", what, type(exc).__name__,
                    exc, self.handoff.pending()[0], self.backoff, exc_info=first)

    def recovered(self) -> None:
        """A workqueue call succeeded: after an outage, a resync is due at once."""
        if self.backoff:
            log.info("controller: the workqueue answers again; resyncing (what it held may be lost)")
            self.resync_now = True
        self.backoff, self.retry_at = 0.0, -float("inf")

    def enqueue_handed_off(self, batch_size: int) -> bool:
        """Write up to `batch_size` handed-off objects into the object cache, then enqueue the keys; True when
        there were any. On failure the batch goes back to the handoff (a cache write and an add are idempotent)."""
        if self.clock() < self.retry_at:
            return False  # backing off: the keys stay in the handoff
        objects, keys = self.handoff.take_objects_and_keys(batch_size)  # each key's object is among them
        if not keys and not objects:
            return False
        why = self.handoff.take_triggers(keys)
        try:
            if why and self.note is not None:
                self.note(self._why_entries(why))
            if objects and self.cache_and_enqueue is not None:
                added = self.cache_and_enqueue(objects, keys)
            else:
                if objects:
                    self.cache_write(objects)
                added = self.enqueue_many(keys) if keys else []
        except Exception as exc:
            self.handoff.put_objects_back(objects)
            self.handoff.put_keys(keys, why)
            self.failed("enqueue", exc)
            return False
        self.recovered()
        self.enqueued += len(keys)
        for key in added:
            count_add(key, self.names)
        return True

    def _why_entries(self, why: dict[str, Why]) -> dict[str, str]:
        """The keys' triggers as `WorkQueue.note` takes them, loops marked, each counted in the metric."""
        now, entries = self.clock(), {}
        for key, (kept, dropped) in why.items():
            kind = controller_of(key, self.names) or ""
            marked = [self.loops.mark(key, t, now) for t in kept]
            for t in marked:
                metrics.RECONCILE_TRIGGERS.labels(kind, triggers.label(t)).inc()
            entries[key] = triggers.encode(marked, dropped)
        return entries

    def pump_once(self) -> bool:
        """Release the delayed and expired keys (dispatch.pump), and every EPOCH_CHECK_SECONDS read the queue's
        epoch (`epoch_check`); True when any key moved. A failure starts the backoff."""
        try:
            did = bool(self.pump())
            if self.epoch is not None and self.clock() >= self._next_epoch:
                self._next_epoch = self.clock() + EPOCH_CHECK_SECONDS
                self.epoch_check()
        except Exception as exc:
            self.failed("pump", exc)
            return False
        self.recovered()
        return did

    def epoch_check(self) -> None:
        """Read the queue's epoch (writing ours when it has none); a changed one means Redis lost the queue's
        state without a call failing (restarted empty between two calls, or flushed): a resync is due at once."""
        assert self.epoch is not None
        seen = self.epoch(uuid.uuid4().hex)
        if self.epoch_seen is not None and seen != self.epoch_seen:
            log.warning("controller: the workqueue lost its state (Redis restarted empty or was flushed); resyncing")
            self.resync_now = True
        self.epoch_seen = seen

    def say_cache_live(self, ttl: float | None) -> None:
        """Tell the workers that this controller's informers keep the object cache (None: no longer). Not counted
        as work; a failure only means that runs apply their children for a while."""
        try:
            self.cache_live(ttl)
        except Exception:
            log.debug("controller: object cache liveness not written", exc_info=True)
