"""Lease renewal of the runs in progress: one thread per process renews the lease of every run in progress, each every
third of its queue's lease time, for the time its caller gives at most (the runner gives Celery's time limit,
`claimed.max_run_seconds`). It imports the workqueue and the thread supervisor, nothing else of the engine. The
thread is supervised (`reconcilers.engine.supervise`, `lease-renewals`): if it dies, it is started again within a
second, counted in `opsconsole_thread_restarts_total{thread="lease-renewals"}`, and the leases are renewed again (a
lease renewed late is still ours unless it expired meanwhile: then `renew` says so and the run is told it lost it)."""

from __future__ import annotations

import logging
import os
import threading
import time

from reconcilers.engine import supervise
from reconcilers.engine.workqueue import WorkQueue

log = logging.getLogger(__name__)

#: the renewal thread's name (its `thread` label)
THREAD_NAME = "lease-renewals"


class _Renewals:
    """One thread per process renewing the leases of the runs in progress (a thread per run cost each reconcile
    its start and join): each lease every third of its queue's lease time, the earliest due first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._leases: dict[int, LeaseRenewer] = {}
        self._pid = 0

    def add(self, lease: LeaseRenewer) -> None:
        with self._lock:
            if self._pid != os.getpid():  # first use in this process (a prefork child inherits no thread)
                self._pid = os.getpid()
                self._leases = {}
                # supervised: a renewal thread that dies is started again at once (a lease lasts seconds)
                supervise.start(THREAD_NAME, self._run, min_backoff=0.05, max_backoff=1.0)
            self._leases[id(lease)] = lease
        self._wake.set()

    def remove(self, lease: LeaseRenewer) -> None:
        with self._lock:
            self._leases.pop(id(lease), None)

    def _due(self) -> tuple[list[LeaseRenewer], float]:
        now = time.monotonic()
        with self._lock:
            leases = list(self._leases.values())
        due = [lease for lease in leases if lease.next_at <= now]
        upcoming = [lease.next_at - now for lease in leases if lease.next_at > now]
        return due, min(upcoming, default=1.0)

    def _run(self) -> None:
        while True:
            self._wake.clear()  # before looking: a lease added meanwhile wakes the wait below
            due, wait = self._due()
            for lease in due:
                lease.renew_once()
            if not due:
                self._wake.wait(max(0.005, wait))


_RENEWALS = _Renewals()


#: how long a lease is renewed at most when the caller names no time (the default of Celery's time limit)
DEFAULT_MAX_SECONDS = 600.0


class LeaseRenewer:
    """Renews a key's lease every third of the lease time until stopped (on the process's renewal thread), for
    `max_seconds` at most (then the lease is let go: it expires and the key is queued again, and the run, if it
    ever ends, writes nothing); notes when the lease was lost."""

    def __init__(self, queue: WorkQueue, key: str, owner: str, max_seconds: float = DEFAULT_MAX_SECONDS) -> None:
        self.queue, self.key, self.owner = queue, key, owner
        self.interval = max(0.05, queue.lease_seconds / 3.0)
        self.max_seconds = max_seconds
        self.lost = False
        self.next_at = float("inf")
        self.started_at = 0.0
        self._stopped = False

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.next_at = self.started_at + self.interval
        _RENEWALS.add(self)

    def renew_once(self) -> None:
        """One renewal (the renewal thread calls it when due); a lease found lost is renewed no more."""
        self.next_at = time.monotonic() + self.interval
        if self._stopped:
            return
        if self.next_at - self.interval - self.started_at > self.max_seconds:
            self.lost = True
            _RENEWALS.remove(self)
            log.warning("the run of %s took longer than %.0fs; its lease is left to expire", self.key,
                        self.max_seconds)
            return
        try:
            if not self.queue.renew(self.key, self.owner) and not self._stopped:  # not just released by done()
                self.lost = True
                _RENEWALS.remove(self)
                log.warning("lost the lease on %s", self.key)
        except Exception:
            log.exception("could not renew the lease on %s", self.key)

    def stop(self) -> None:
        self._stopped = True
        _RENEWALS.remove(self)
