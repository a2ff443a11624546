"""The runner: one run of one key, from taking its lease to releasing it (the Celery task calls `run`).

It orchestrates and decides nothing itself; one key goes down these steps, each in its own module:
1. Lease (`workqueue`): claim the key (owner `host:pid:uuid`); someone else holds it → return at once (the key
   stays dirty, so that owner's `done()` re-queues it). A thread renews the lease while we run (for Celery's time
   limit at most). After its key, a task runs the keys still waiting in the workqueue, the longest queued first
   (`drain_ready`), each claimed when a thread is free to run it, up to OPSCONSOLE_DRAIN_THREADS at once; when none
   waits, the task's thread lingers idle OPSCONSOLE_DRAIN_LINGER_SECONDS for the next key (`WorkQueue.wait_for_key`:
   at a steady trickle of changes a key reaches a lingering worker without a Celery message), at most
   concurrency − 1 processes of a worker node at once (`linger_slots`).
2. Read: the object from the object cache the claim brought (`objectcache`: the controller's newest view, or the
   last run's write), unless it is missing, being deleted or older than the record; else GET the live object
   (`kube`). Gone → its mirror is marked deleted. The phase and the healing state on
   record come from `healing.state`, the manual requests the run picks up from `recording`. A suspended object
   is not reconciled (`healing.suspend.suspension_check`: nothing recorded, the key looked at again at expiry).
3. Step (`step.reconcile_step`): the reconcile and the status write; an `Outcome` with one queue action.
4. Record (`recording.reconcile_record`, one transaction): the run, any transitions, the mirror, requests, the
   verification of a rollback (a concluded one runs the key once more, to write its conditions).
5. Complete (`step.complete`): an Event per recorded transition, the finalizer removed when the cleanup is done.
6. Queue: the outcome's `QueueAction`; finally `done()` (which dispatches the key when it changed meanwhile).
   A run that breaks outside the reconcile (the database away: nothing of it recorded) is an error retried
   with backoff too.
7. Telemetry: the span `reconcile <Kind>` around it all (head-sampled: an unsampled run that ended in an error,
   was slow or handled a manual request keeps one span, `sampling.keep_unsampled`), controller-runtime's metrics
   at the end.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone
from opentelemetry import context as otel_context
from opentelemetry.trace import Status, StatusCode

from reconcilers.core.meta import FLUX_REQUESTED_AT, RECONCILE_REQUESTED_AT
from reconcilers.core.types import Request
from reconcilers.engine import (
    apiclient,
    dispatch,
    kube,
    metrics,
    objectcache,
    provenance,
    recording,
    registry,
    sampling,
    step,
)
from reconcilers.engine.healing import state as healing_state
from reconcilers.engine.healing import suspend
from reconcilers.engine.lease_renewal import LeaseRenewer, max_run_seconds  # noqa: F401 (re-exported)
from reconcilers.engine.step import Outcome, QueueAction
from reconcilers.engine.workqueue import Claim, LingerRefused, WorkQueue

SKIPPED = "skipped"  # the task's answer when another worker holds the key (not a run: nothing is recorded)
SUSPENDED = "suspended"  # the object's reconciles are suspended (not a run: nothing is recorded)

log = logging.getLogger(__name__)


def request_annotations() -> tuple[str, ...]:
    """The annotations that ask for a manual reconcile: opsconsole's, and Flux's `reconcile.fluxcd.io/requestedAt`
    unless `OPSCONSOLE_FLUX_REQUESTED_AT` is off."""
    if getattr(settings, "OPSCONSOLE_FLUX_REQUESTED_AT", True):
        return (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT)
    return (RECONCILE_REQUESTED_AT,)


def _worker() -> str:
    """`host:pid` of this process (computed per call: prefork children are forked after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run(key: str, *, only_if_queued: bool = False, drain: bool = False) -> str:
    """Reconcile `key` once. Returns the run's result label, or 'skipped' when another worker holds the key
    or, `only_if_queued`, when the workqueue no longer has it queued (a duplicate task: its work was done).
    Then, `drain`, the keys still waiting in the workqueue (`drain_ready`), in the same task."""
    queue = dispatch.get_queue()
    owner = _owner()
    claim = queue.claim(key, owner, only_if_dirty=only_if_queued)
    if claim is None:
        log.debug("%s is being reconciled elsewhere or no longer queued; skipped", key)
        result = SKIPPED
    else:
        result = _run_claimed(queue, claim, hold=drain)
    if drain:
        drain_ready(queue)
    return result


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
        lingerer = _owner()
        until = time.monotonic() + self.linger
        while True:
            with self._cond:
                wait = min(until, self.deadline) - time.monotonic()
                if wait <= 0 or self.ran >= self.limit:
                    return
                self.ran += 1  # counted before the claim, as in _next
            claim = None
            try:
                claim = self.queue.wait_for_key(lingerer, _owner(), wait, group=group, cap=cap)
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
                finished = _execute_claimed(self.queue, claim, hold=True)
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
                _release(finished, hold=True)
            return None
        try:
            claim = (self.queue.claim_next(_owner()) if finished is None else
                     self.queue.done_then_claim_next(finished.key, finished.claim.owner, _owner(),
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


def _owner() -> str:
    """A lease owner: `host:pid:` and a fresh suffix (one per run)."""
    return f"{_worker()}:{uuid.uuid4().hex[:8]}"


def _run_claimed(queue: WorkQueue, claim: Claim, *, hold: bool = False) -> str:
    """One run of a claimed key, its lease renewed meanwhile and released after. A key that became dirty while it
    ran is sent again, or, `hold` (the caller drains the queue next), left ready for the drain: a change to a
    child during the run (its Deployment coming up) costs no Celery message, which the drain would have made
    find nothing."""
    this = _execute_claimed(queue, claim, hold=hold)
    _release(this, hold=hold)
    return this.result


def _execute_claimed(queue: WorkQueue, claim: Claim, *, hold: bool) -> Run:
    """Run a claimed key, its lease renewed meanwhile; the lease is left held (the caller releases it: `_release`,
    or the drain's next claim), unless the run raised (then released here, `hold` as `_run_claimed` says)."""
    renewer = LeaseRenewer(queue, claim.key, claim.owner)
    renewer.start()
    this = Run(claim.key, claim, queue, renewer)
    try:
        this.result = this.execute()
    except BaseException:
        renewer.stop()
        _release(this, hold=hold)
        raise
    renewer.stop()
    return this


def _release(this: Run, *, hold: bool) -> None:
    """Release a run's lease (`dispatch.done`); a failure is logged: the lease then expires and reap_expired()
    re-queues the key."""
    try:
        dispatch.done(this.key, this.claim.owner, forget=this.forget, requeue_after=this.requeue_after, hold=hold)
    except Exception:
        log.exception("could not release the lease on %s", this.key)




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


class _NotRead(Exception):
    """The run ends before its reconcile: its object could not be read (`result` 'error') or is gone ('success')."""

    def __init__(self, result: str) -> None:
        super().__init__(result)
        self.result = result


class Run:
    """One run of one key (see the module docstring for the steps)."""

    def __init__(self, key: str, claim: Claim, queue: WorkQueue, renewer: LeaseRenewer) -> None:
        self.key, self.claim, self.queue, self.renewer = key, claim, queue, renewer
        self.started_at = timezone.now()
        self.t0 = time.monotonic()
        self.t0_ns = time.time_ns()
        self.error_class = ""
        self.trace_id = ""
        self.forget = False  # reset the key's failure count when the lease is released (one round trip less)
        self.requeue_after: float | None = None  # RequeueAfter, applied as the lease is released (the same trip)
        self.read_from = objectcache.API  # where the object came from (objectcache.CACHE, API or STALE)
        self.result = "error"  # the run's result label, once it ended

    def execute(self) -> str:
        try:
            reconciler = registry.for_key(self.key)
            self.request = Request.from_key(self.key)
        except (registry.UnknownKind, ValueError) as exc:
            log.error("dropping %s: %s", self.key, exc)
            self.queue.forget(self.key)
            return "error"
        self.reconciler = reconciler
        metrics.ACTIVE_WORKERS.labels(reconciler.name).inc()
        tracer = sampling.tracer("opsconsole.reconcilers")
        try:
            with tracer.start_as_current_span(f"reconcile {reconciler.resource.kind}",
                                              attributes={"opsconsole.key": self.key}) as span:
                self.trace_id = sampling.sampled_trace_id(span)  # '' when this run is not sampled
                try:
                    result = self._execute(span)
                except Exception as exc:
                    result = self._failed(exc)
                span.set_attribute("opsconsole.result", result)
                if result == "error":
                    span.set_status(Status(StatusCode.ERROR, self.error_class or "error"))
        finally:
            metrics.ACTIVE_WORKERS.labels(reconciler.name).dec()
        if result == SUSPENDED:
            return result
        metrics.reconcile_observed(reconciler.name, result, time.monotonic() - self.t0,
                                   self.claim.claimed_at - self.claim.queued_at, self.error_class)
        return result

    def _execute(self, span: Any) -> str:
        rec = self.reconciler
        namespace, name = self.request.namespace, self.request.name
        api = apiclient.get_api_client()
        try:
            obj, state = self._read(api)
        except _NotRead as stop:
            return stop.result
        meta = obj["metadata"]
        span.set_attributes({"opsconsole.kind": rec.resource.kind, "opsconsole.namespace": namespace,
                             "opsconsole.name": name, "opsconsole.uid": meta.get("uid") or "",
                             "opsconsole.generation": int(meta.get("generation") or 0),
                             "opsconsole.read": self.read_from})
        if state is None and suspend.annotated(obj) is not None:  # a suspension needs a record to be on
            recording.resource_mirror_upsert(rec.resource, obj)
            state = healing_state.resource_state(meta["uid"], head=True)
        check = suspend.suspension_check(api, rec, obj, state)
        if check.skip:
            span.set_attribute("opsconsole.suspended", True)
            self.queue.forget(self.key)
            if check.delay is not None:
                self.queue.add_after(self.key, check.delay + 0.05)
            return SUSPENDED
        obj = check.obj
        recorded = state.phase if state is not None else None
        annotations = request_annotations()
        asked = step.unhandled_request(obj, annotations)
        token = asked[1] if asked else None
        if asked:
            # an annotation set by someone else than opsconsole (kubectl annotate, flux) gets its request row here
            recording.annotation_request_ensure(self.key, obj, *asked)
            recording.requests_picked_up(self.key, asked[1])
            if span.is_recording() and (others := recording.request_trace_ids(self.key, token, self.trace_id)):
                span.set_attribute("opsconsole.request.trace_id", others)

        # a run of an object with no phase on record yet (its first) applies its children without looking them up:
        # they are not there yet (in a burst, half of all lookups would find nothing); an apply is always safe
        children = objectcache.ChildCache(self.queue) if recorded and objectcache.enabled() else None
        outcome = step.reconcile_step(rec, api, obj, recorded, span=span, lease_held=lambda: not self.renewer.lost,
                                      request_annotations=annotations,
                                      healing=healing_state.healing_view(state, obj), child_cache=children,
                                      engine_wrote=provenance.engine_wrote_checker(self.queue.redis))
        provenance.outcome_noted(self.queue.redis, rec.resource, obj, recorded, outcome)
        sent, unchanged = (outcome.ctx.applies_sent, outcome.ctx.applies_unchanged) if outcome.ctx else (0, 0)
        if sent or unchanged:
            span.set_attributes({"opsconsole.children.applied": sent, "opsconsole.children.unchanged": unchanged})
            for result, count in (("applied", sent), ("unchanged", unchanged)):
                if count:
                    metrics.CHILD_APPLIES.labels(rec.name, result).inc(count)
        if not span.is_recording():
            self._keep_unsampled(outcome.result, outcome.error_class, outcome.token, {
                "opsconsole.kind": rec.resource.kind, "opsconsole.namespace": namespace, "opsconsole.name": name,
                "opsconsole.uid": meta.get("uid") or "", "opsconsole.generation": int(meta.get("generation") or 0),
                "opsconsole.error": f"{outcome.error_class}: {outcome.error_message}"[:500]
                if outcome.error_class else ""})
        record = recording.reconcile_record(
            recording.RunRecord(key=self.key, kind=rec.resource.kind, started_at=self.started_at,
                                duration_seconds=time.monotonic() - self.t0, result=outcome.result,
                                error_class=outcome.error_class, error_message=outcome.error_message,
                                attempt=self.claim.failures + 1, worker=_worker(), trace_id=self.trace_id,
                                request_token=outcome.token),
            recording.ObservedObject.from_api(rec.resource, outcome.obj), outcome.change, rec.state_machine,
            live=outcome.obj, out_of_band=outcome.out_of_band, reconciler=rec,
            head=state.head if state is not None else None)
        self.error_class = outcome.error_class
        span.set_attributes({"opsconsole.phase.from": record.from_phase, "opsconsole.phase.to": record.to_phase})
        step.complete(outcome, self._events(outcome, record))
        self._queue(outcome)
        if record.rollback_concluded:
            span.set_attribute("opsconsole.rollback", record.rollback_concluded)
            self.queue.add(self.key)  # the next run writes the rollback's conditions
        return outcome.result

    def _read(self, api: Any) -> tuple[dict[str, Any], healing_state.RecordedState | None]:
        """The object and its state on record. The object comes from the object cache when the claim brought one
        that is `objectcache.usable` (not older than the record's), else from a GET (`_get`)."""
        cached = objectcache.decode(self.claim.cached) if self.claim.cached and objectcache.enabled() else None
        if cached is not None and objectcache.usable(cached, ""):
            obj, self.read_from = cached, objectcache.CACHE
        else:
            obj, self.read_from = self._get(api), objectcache.API
        state = healing_state.resource_state(obj["metadata"]["uid"], head=True)
        if self.read_from == objectcache.CACHE and state is not None and not objectcache.usable(
                obj, state.resource_version):
            uid = obj["metadata"]["uid"]
            obj, self.read_from = self._get(api), objectcache.STALE  # the cache fell behind the record: the live one
            if obj["metadata"]["uid"] != uid:  # deleted and made again meanwhile: another record
                state = healing_state.resource_state(obj["metadata"]["uid"], head=True)
        metrics.OBJECT_READS.labels(self.reconciler.name, self.read_from).inc()
        return obj, state

    def _get(self, api: Any) -> dict[str, Any]:
        """GET the live object. A failure is on record and retried with backoff; a 404 marks the mirror deleted
        (`_NotRead` either way)."""
        rec = self.reconciler
        try:
            obj = kube.get_object(api, rec.resource, self.request.namespace or None, self.request.name)
        except Exception as exc:
            self.error_class = "ApiError" if isinstance(exc, kube.ApiException) else type(exc).__name__
            delay = self._retry(QueueAction.BACKOFF)
            log.warning("GET %s failed (%s); retrying in %.3fs", self.key, exc, delay)
            self._record_unobserved(f"GET failed: {exc}"[:2000])
            raise _NotRead("error") from exc
        if obj is None:
            recording.resource_mirror_gone(self.key)
            self.queue.forget(self.key)
            raise _NotRead("success")
        return obj

    def _events(self, outcome: Outcome, record: recording.RecordOutcome) -> list[step.EventSpec]:
        """The Events of what was recorded (the record, not the plan, is the truth when they differ)."""
        events = step.events_for(self.reconciler, record.transitions)
        if record.anomaly_id is not None and outcome.change is not None:
            events.append(step.refused_event(record.from_phase, outcome.change.to_phase, record.anomaly_id))
        if record.escalation is not None:
            events.append(step.EventSpec("Warning", record.escalation.reason, record.escalation.message))
        foreign = outcome.out_of_band
        if foreign is not None and record.out_of_band_id is not None:
            events.append(step.EventSpec("Warning", "OutOfBandStatusChange",
                                         f"status.phase {foreign.phase} was not written by the engine (by "
                                         f"{foreign.actor}; anomaly {record.out_of_band_id}); not recorded as a "
                                         "transition"))
        return events

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
            self.queue.add(self.key)  # processing: marked dirty, dispatched by done()
        elif action is QueueAction.REQUEUE_AFTER:
            self.requeue_after = outcome.delay or 0.0  # with done()

    def _retry(self, action: QueueAction, delay: float | None = None) -> float:
        """Put the key back after a failure (its backoff, or `delay` for a TemporaryError); counted in
        workqueue_retries_total. Returns the delay."""
        if action is QueueAction.RETRY_AFTER:
            self.queue.add_after(self.key, delay or 0.0)
        else:
            delay = self.queue.add_rate_limited(self.key)
        metrics.WORKQUEUE_RETRIES.labels(self.reconciler.name, self.reconciler.name).inc()
        return delay or 0.0

    def _failed(self, exc: Exception) -> str:
        """The run broke outside the reconcile itself (the database or Redis away): nothing of it was recorded
        (the recording is one transaction), so the key is retried with backoff, as an error would be."""
        self.error_class = type(exc).__name__
        try:
            delay = self._retry(QueueAction.BACKOFF)
        except Exception:  # Redis too: the lease expires and reap_expired() re-queues the key
            log.warning("%s: the run failed (%s: %s) and no retry could be queued", self.key, self.error_class, exc,
                        exc_info=True)
            return "error"
        log.warning("%s: the run failed (%s: %s); retrying in %.3fs", self.key, self.error_class, exc, delay)
        return "error"

    def _keep_unsampled(self, result: str, error_class: str, token: str | None, attributes: dict[str, Any]) -> None:
        """An unsampled run that ended in an error, was slow or handled a manual request gets its one span
        (reconcilers.engine.sampling); the record links to it."""
        why = sampling.why_keep(result, time.monotonic() - self.t0,
                                float(getattr(settings, "OPSCONSOLE_TRACE_SLOW_SECONDS", 1.0)), token is not None)
        if why:
            extra = {"opsconsole.key": self.key, "opsconsole.result": result, "opsconsole.attempt":
                     self.claim.failures + 1, **({"opsconsole.request.token": token} if token else {})}
            self.trace_id = sampling.keep_unsampled(f"reconcile {self.reconciler.resource.kind}", self.t0_ns,
                                                    {**attributes, **extra}, why, error_class if result == "error"
                                                    else "")

    def _record_unobserved(self, message: str) -> None:
        """The run that could not read its object is on record too (best effort: the database may be
        what failed)."""
        if not self.trace_id:
            self._keep_unsampled("error", self.error_class, None, {"opsconsole.error": message[:500]})
        try:
            recording.run_record_unobserved(recording.RunRecord(
                key=self.key, kind=self.reconciler.resource.kind, started_at=self.started_at,
                duration_seconds=time.monotonic() - self.t0, result="error", error_class=self.error_class,
                error_message=message, attempt=self.claim.failures + 1, worker=_worker(), trace_id=self.trace_id))
        except Exception:
            log.warning("could not record the failed run of %s", self.key, exc_info=True)

