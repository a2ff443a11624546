"""What a run does with its key when it ends (`run.Run`'s part 5, Queue): the outcome's `QueueAction` applied to
the workqueue (a retry with backoff or after a TemporaryError's delay, a requeue now or after, the failures reset
with the lease's release), each put-back noted as the next run's trigger (`reconcilers.engine.triggers`).
"""

from __future__ import annotations

import logging

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics, triggers
from reconcilers.engine.step import Outcome, QueueAction
from reconcilers.engine.workqueue import WorkQueue

log = logging.getLogger("reconcilers.engine.run")


class QueueActions:
    """The run's queue actions, mixed into `run.Run` (which sets these attributes)."""

    key: str
    queue: WorkQueue
    reconciler: Reconciler
    error_class: str
    run_id: int | None
    forget: bool
    requeue_after: float | None

    def _queue(self, outcome: Outcome) -> None:
        action = outcome.queue
        if action in (QueueAction.BACKOFF, QueueAction.RETRY_AFTER):
            delay = self._retry(action, outcome.delay)
            log.info("%s: %s, retrying in %.3fs", self.key, outcome.error_class or outcome.result, delay)
            return
        if action is QueueAction.KEEP:
            return
        self.forget = True  # with done(): the failures reset as the lease goes
        if action is QueueAction.REQUEUE_NOW:
            self._note_requeue("requeue")
            self.queue.add(self.key)  # processing: marked dirty, dispatched by done()
        elif action is QueueAction.REQUEUE_AFTER:
            self.requeue_after = outcome.delay or 0.0  # with done()
            self._note_requeue("requeue_after", delay=self.requeue_after)

    def _note_requeue(self, reason: str, *, delay: float | None = None) -> None:
        """Why the next run of the key runs: this run put it back (best effort: a trigger is never a reason to
        fail a run)."""
        trigger = triggers.requeue_trigger(reason, error_class=self.error_class, run_id=self.run_id, delay=delay)
        try:
            self.queue.note({self.key: triggers.encode([trigger])}, triggers.BOUND)
            metrics.RECONCILE_TRIGGERS.labels(self.reconciler.name, triggers.label(trigger)).inc()
        except Exception:  # noqa: BLE001
            log.debug("%s: requeue trigger not noted", self.key, exc_info=True)

    def _retry(self, action: QueueAction, delay: float | None = None) -> float:
        """Put the key back after a failure (backoff, or a TemporaryError's `delay`), counted; returns the delay."""
        self._note_requeue("retry_after" if action is QueueAction.RETRY_AFTER else "error", delay=delay)
        if action is QueueAction.RETRY_AFTER:
            self.queue.add_after(self.key, delay or 0.0)
        else:
            delay = self.queue.add_rate_limited(self.key)
        metrics.WORKQUEUE_RETRIES.labels(self.reconciler.name, self.reconciler.name).inc()
        return delay or 0.0
