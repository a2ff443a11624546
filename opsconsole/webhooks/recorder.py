"""Every admission decision on the action record (the chained, append-only `ActionRecord`), written off the
request path: the webhook answers within its timeout even when the database is slow, and a decision is written
once however often it is handed over (deduplicated by the AdmissionReview's uid and the webhook), retried while
the database refuses, and flushed before the server exits.

A record: action `admission.validate` / `admission.mutate`, actor the Kubernetes user, auth `kubernetes`, method
the operation (CREATE, UPDATE), target `Kind namespace/name`, reason the refusal's messages, status 200 when
admitted (else 422, or 500 for a kind's failing hook), detail: uid, groups, the patch, dryRun, the hook's error.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from django.db import DatabaseError, close_old_connections, connections

from opsconsole.accounts.models import ActionRecord
from opsconsole.accounts.services import action_record
from reconcilers.engine.admission import Decision

log = logging.getLogger(__name__)
RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 5.0


def decision_record(decision: Decision, path: str) -> ActionRecord | None:
    """Write one decision (None when it is on record already)."""
    action = f"admission.{decision.webhook}"
    if ActionRecord.objects.filter(action=action, detail__uid=decision.uid).exists():
        return None
    return action_record(action=action, method=decision.operation[:8], path=path,
                         status_code=200 if decision.allowed else decision.code, actor=decision.user.username,
                         auth="kubernetes", target=decision.target, reason="; ".join(decision.reasons),
                         detail=decision.detail())


class DecisionRecorder:
    """A thread that writes the decisions handed to it, in order."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Decision, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="admission-recorder", daemon=True)
        self._stopping = threading.Event()
        self.written = 0

    def start(self) -> DecisionRecorder:
        self._thread.start()
        return self

    def put(self, decision: Decision, path: str) -> None:
        """Hand over a decision; returns at once."""
        self._queue.put((decision, path))

    def pending(self) -> int:
        return self._queue.qsize()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is left (up to `timeout`), then end the thread."""
        self._stopping.set()
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._drain()
        finally:
            connections.close_all()  # this thread's connection: a test database can then be dropped

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            decision, path = item
            delay, failures = RETRY_SECONDS, 0
            while True:
                try:
                    if decision_record(decision, path) is not None:
                        self.written += 1
                    break
                except DatabaseError as exc:
                    failures += 1
                    if failures == 1:
                        log.warning("admission decision %s not recorded yet (%s); retrying", decision.uid, exc,
                                    exc_info=True)
                    elif failures % 20 == 0:
                        log.warning("admission decision %s still not recorded after %d tries (%s); %d waiting",
                                    decision.uid, failures, exc, self._queue.qsize())
                    if self._stopping.is_set() and failures >= 3:
                        log.error("admission decisions not recorded at shutdown: %d (%s)",
                                  1 + self._queue.qsize(), exc)
                        return
                    close_old_connections()
                    time.sleep(delay)
                    delay = min(delay * 2, MAX_RETRY_SECONDS)
