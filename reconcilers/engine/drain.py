"""Draining and lingering: after its own key, a task runs the keys still waiting in the workqueue, on the task's
thread and this process's drain threads, and then lingers idle a moment for the next key.

The keys are run the longest queued first (`drain_ready`), each claimed when a thread is free to run it, up to
OPSCONSOLE_DRAIN_THREADS at once (`drain_threads`); when none waits, the task's thread lingers idle
OPSCONSOLE_DRAIN_LINGER_SECONDS for the next key (`WorkQueue.wait_for_key`: at a steady trickle of changes a key
reaches a lingering worker without a Celery message), at most concurrency − 1 processes of a worker node at once
(`linger_slots`, set by the worker's main process before its pool starts). The Celery task (`run_and_drain`) and
the worker's signal handlers use this module; each key's run goes through `reconcilers.engine.claimed`.

In a trace, the task's span (`run/reconcilers.reconcile`) holds its own key's run and then a `drain` span (the
keys it ran, each a trace of its own) with a `linger` span (the idle wait for a next key): so the task's time is
accounted for, however long it lingered after a run of a few milliseconds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from opentelemetry import context as otel_context
from opentelemetry import trace

from reconcilers.engine import claimed, dispatch, sampling
from reconcilers.engine.run import Run
from reconcilers.engine.workqueue import Claim, LingerRefused, WorkQueue

log = logging.getLogger(__name__)


def run_and_drain(key: str, *, only_if_queued: bool = False) -> str:
    """What the Celery task does: reconcile `key` once (`claimed.run_key`: its result label, or 'skipped'), its
    key left ready for this drain when it changed meanwhile, then the keys still waiting (`drain_ready`)."""
    queue = dispatch.get_queue()
    result = claimed.run_key(queue, key, only_if_queued=only_if_queued, hold=True)
    with _span("drain") as span:
        ran = drain_ready(queue)
        if span.is_recording():
            span.set_attribute("opsconsole.drain.keys", ran)
    return result


def _span(name: str) -> Any:
    """A child span of the task's for a part of it (`drain`, `linger`); nothing when the task is not traced."""
    if not trace.get_current_span().is_recording():
        return contextlib.nullcontext(trace.INVALID_SPAN)
    return sampling.tracer("opsconsole.reconcilers").start_as_current_span(name)


_linger_node: tuple[str, int] | None = None  # (worker node, processes that may linger at once): `linger_slots`


def linger_slots(node: str, processes: int) -> None:
    """Called in a worker's main process before its pool starts (and so inherited by every child): this node runs
    `processes` tasks at once, of which at most `processes` - 1 linger (`_Drain._lingering`), so that one is always
    free for a task the node is sent (a manual request, a released RequeueAfter, a key beyond the lingerers). A
    node of one process never lingers. Outside a worker (none set), lingering is not capped."""
    global _linger_node
    _linger_node = (node, max(0, int(processes) - 1))


def drain_threads() -> int:
    """How many reconciles a worker process runs at once: OPSCONSOLE_DRAIN_THREADS, at least 1."""
    return max(1, int(getattr(settings, "OPSCONSOLE_DRAIN_THREADS", 4)))


def drain_ready(queue: WorkQueue) -> int:
    """Run the keys waiting in the workqueue (queued, not processing), the longest queued first, whether a task
    was sent for them or not (that task then finds nothing to do). Each is claimed only when a thread is free to
    run it, so no key waits behind a slow neighbour: it stays there for any other worker. Up to
    OPSCONSOLE_DRAIN_THREADS run at once, on this process's drain threads (`_Drain`), while keys wait. When none
    waits, the task's thread lingers idle OPSCONSOLE_DRAIN_LINGER_SECONDS after the last key it ran, unless as many
    processes of its worker node as `linger_slots` allows linger already: a key that becomes ready meanwhile is
    held for it and wakes it, no Celery message sent (`WorkQueue.wait_for_key`). Stops after OPSCONSOLE_DRAIN_KEYS
    keys or OPSCONSOLE_DRAIN_SECONDS (well inside the Celery time limit), then sends tasks for the keys still
    waiting without one (`top_up`). Returns the number of keys run."""
    drain = _Drain(queue, limit=int(getattr(settings, "OPSCONSOLE_DRAIN_KEYS", 100)),
                   seconds=float(getattr(settings, "OPSCONSOLE_DRAIN_SECONDS", 20.0)),
                   width=drain_threads(), linger=float(getattr(settings, "OPSCONSOLE_DRAIN_LINGER_SECONDS", 2.0)))
    try:
        ran = drain.run()
        dispatch.top_up()
    except Exception:  # Redis away: the pump sends what is ready once it is back
        log.warning("draining the workqueue stopped", exc_info=True)
        ran = drain.ran
    return ran


class _Drain:
    """One task's draining: the task's thread claims and runs waiting keys one after another; each key it finds
    while fewer than `width` run starts another loop on a drain thread of this process (`_drain_pool`), which
    does the same, so that while a run waits on the API or the database another one uses the CPU. A loop ends
    when no key waits, at the limit or at the deadline; `run()` returns when every loop has ended. A run stuck
    on a drain thread does not hold its key forever: its lease is renewed no longer than Celery's time limit
    (`LeaseRenewer.max_seconds`), as the time limit would have killed it in the task's thread."""

    def __init__(self, queue: WorkQueue, *, limit: int, seconds: float, width: int, linger: float = 0.0) -> None:
        self.queue, self.limit, self.width, self.linger = queue, limit, width, linger
        self.deadline = time.monotonic() + seconds
        self.ran = 0
        self.active = 1  # the task's own thread
        self._cond = threading.Condition()

    def run(self) -> int:
        try:
            self._loop()
            with _span("linger"):  # idle, waiting for a next key (a key found runs in a trace of its own)
                self._lingering()
        finally:
            with self._cond:
                self.active -= 1
                self._cond.notify_all()
                self._cond.wait_for(lambda: self.active == 0)
        return self.ran

    def _lingering(self) -> None:
        """While no key waits: wait idle for the next one, up to `linger` seconds after the last key run (within
        the drain's limit and deadline), then drain from it as from the task's own key."""
        group, cap = ("", -1) if _linger_node is None else (f"{_linger_node[0]}|", _linger_node[1])
        if self.linger <= 0 or cap == 0:
            return
        lingerer = claimed.owner()
        until = time.monotonic() + self.linger
        while True:
            with self._cond:
                wait = min(until, self.deadline) - time.monotonic()
                if wait <= 0 or self.ran >= self.limit:
                    return
                self.ran += 1  # counted before the claim, as in _next
            claim = None
            try:
                claim = self.queue.wait_for_key(lingerer, claimed.owner(), wait, group=group, cap=cap)
            except LingerRefused:  # the node's other processes linger: this one stays free for sent tasks
                return
            finally:
                if claim is None:
                    with self._cond:
                        self.ran -= 1
            if claim is not None:
                self._loop(claim)
                until = time.monotonic() + self.linger

    def _loop(self, first: Claim | None = None) -> None:
        finished: Run | None = None
        while (claim := first or self._next(finished)) is not None:
            first = None
            if connection.errors_occurred and not connection.in_atomic_block:
                close_old_connections()  # the last run broke the connection: a fresh one (no health check each key)
            # a trace of its own (not a child of the task that drained it), sampled on its own
            token = otel_context.attach(otel_context.Context())
            try:
                finished = claimed.execute_claimed(self.queue, claim, hold=True)
            finally:
                otel_context.detach(token)

    def _next(self, finished: Run | None) -> Claim | None:
        """Release the lease of the run just `finished` (left ready if its key became dirty: this drain or another
        runs it) and claim the next waiting key, in one round trip; None at the limit, the deadline, or when no key
        waits. A key found starts another loop on a drain thread while fewer than `width` run."""
        with self._cond:
            more = self.ran < self.limit and time.monotonic() < self.deadline
            self.ran += more  # this loop's next key, counted before the claim: the limit holds across loops
        if not more:
            if finished is not None:
                claimed.release(finished, hold=True)
            return None
        try:
            claim = (self.queue.claim_next(claimed.owner()) if finished is None else
                     self.queue.done_then_claim_next(finished.key, finished.claim.owner, claimed.owner(),
                                                     forget=finished.forget, requeue_after=finished.requeue_after))
        except Exception:
            with self._cond:
                self.ran -= 1
            raise
        with self._cond:
            if claim is None:
                self.ran -= 1
                return None
            spawn = self.active < self.width
            self.active += spawn
        if spawn:
            _drain_pool(self.width).submit(self._helper)
        return claim

    def _helper(self) -> None:
        try:
            self._loop()
        except Exception:  # Redis away: the keys stay queued for the pump
            log.warning("a drain thread stopped", exc_info=True)
        finally:
            close_old_connections()  # this thread's connection, once older than CONN_MAX_AGE (as after a task)
            with self._cond:
                self.active -= 1
                self._cond.notify_all()


_pools: dict[int, tuple[int, ThreadPoolExecutor]] = {}  # pid → (threads, the pool)
_pools_lock = threading.Lock()


def _drain_pool(width: int) -> ThreadPoolExecutor:
    """This process's drain threads, `width` - 1 of them (a prefork child inherits none; each thread keeps its
    database connection from one key to the next)."""
    pid, threads = os.getpid(), max(1, width - 1)
    with _pools_lock:
        held = _pools.get(pid)
        if held is None or held[0] < threads:
            _pools.clear()
            held = _pools[pid] = (threads, ThreadPoolExecutor(max_workers=threads, thread_name_prefix="drain"))
        return held[1]
