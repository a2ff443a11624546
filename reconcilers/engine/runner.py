"""The runner: one reconcile of one key, from taking its lease to releasing it (the Celery task calls `run`).

1. Claim the key's lease in the workqueue (owner `host:pid:uuid`); someone else holds it → return at once
   (the key stays dirty, so that owner's `done()` re-queues it). A thread renews the lease while we run.
2. GET the live object. Gone → mark the mirror deleted, done.
3. Decide:
   - being deleted, with the reconciler's finalizer: record → Terminating (then re-queue), run `finalize()`
     until it says done, record → Deleted, then remove the finalizer;
   - else add the finalizer the reconciler declares and call `reconcile(ctx, obj)`:
     a Result → its phase; `TemporaryError` → retry after its delay, nothing Failed; `PermanentError` → the
     failed phase with its reason, no retry (a malformed spec is one of these, never a crash); any other
     exception → retry with per-key exponential backoff, recorded as an error.
4. Write the status through `/status` with the resourceVersion read (409 → re-read, rebuild, retry): phase,
   reason, message, observedGeneration, kstatus conditions Ready/Reconciling/Stalled (lastTransitionTime kept
   while a condition's status holds), the reconciler's own fields and conditions, and
   `lastHandledReconcileAt` when the run handled a manual request (`opsconsole.io/reconcile-requested-at`).
   Nothing changed → nothing written.
5. Record in one transaction (`recording.reconcile_record`): the run, any transition, the mirror, requests.
6. Post a Kubernetes Event per recorded transition.
7. Queue bookkeeping: forget on success, add_after for RequeueAfter/TemporaryError, add_rate_limited on
   error/Requeue; finally `done()` (which dispatches the key when it changed meanwhile). A run that breaks
   outside the reconcile (the database away: nothing of it recorded) is an error retried with backoff too.

Results are labelled as controller-runtime labels them: success / error / requeue / requeue_after.

Consistency: the recording's "from" phase is the database's. When a previous run wrote a phase to the object
but died before recording it and this run wants to move on from there, this run first records that phase
(and re-queues), so that no transition is lost and none is doubled.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Condition, PermanentError, Request, Result, TemporaryError
from reconcilers.engine import apiclient, dispatch, kube, recording, registry
from reconcilers.engine.context import EngineContext, now_rfc3339
from reconcilers.engine.kstatus import condition_reason, kstatus_conditions
from reconcilers.engine.workqueue import Claim, WorkQueue

ANNOTATION = "opsconsole.io/reconcile-requested-at"
STATUS_ATTEMPTS = 5
SKIPPED = "skipped"  # the task's answer when another worker holds the key (not a run: nothing is recorded)



def _worker() -> str:
    """`host:pid` of this process (computed per call: prefork children are forked after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"

log = logging.getLogger(__name__)


class StatusConflict(Exception):
    """The status write kept meeting 409 Conflict (the object changes faster than we can write)."""


class LeaseLost(Exception):
    """The key's lease expired during the run: another worker may be reconciling it now."""


@dataclass
class Decision:
    """What one run concluded, before anything is written."""

    result: str
    phase: str | None = None  # the phase to write (None: leave phase, reason, message and conditions alone)
    reason: str = ""
    message: str = ""
    conditions: list[Condition] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    requeue_after: float | None = None
    requeue_now: bool = False  # re-queue once this run ends (a step of a multi-step flow)
    rate_limited: bool = False  # add_rate_limited: per-key backoff
    forget: bool = True  # reset the key's failure count
    error_class: str = ""
    error_message: str = ""
    remove_finalizer: bool = False


# -- the task's entry point --------------------------------------------------------------------------------


def run(key: str, *, only_if_queued: bool = False) -> str:
    """Reconcile `key` once. Returns the run's result label, or 'skipped' when another worker holds the key
    or, `only_if_queued`, when the workqueue no longer has it queued (a duplicate task: its work was done)."""
    queue = dispatch.get_queue()
    owner = f"{_worker()}:{uuid.uuid4().hex[:8]}"
    claim = queue.claim(key, owner, only_if_dirty=only_if_queued)
    if claim is None:
        log.debug("%s is being reconciled elsewhere or no longer queued; skipped", key)
        return SKIPPED
    renewer = LeaseRenewer(queue, key, owner)
    renewer.start()
    try:
        return Run(key, claim, queue, renewer).execute()
    finally:
        renewer.stop()
        try:
            dispatch.done(key, owner)
        except Exception:  # the lease then expires and reap_expired() re-queues the key
            log.exception("could not release the lease on %s", key)


class LeaseRenewer(threading.Thread):
    """Renews a key's lease every third of the lease time until stopped; notes when the lease was lost."""

    def __init__(self, queue: WorkQueue, key: str, owner: str) -> None:
        super().__init__(name=f"lease-{key}", daemon=True)
        self.queue, self.key, self.owner = queue, key, owner
        self.interval = max(0.05, queue.lease_seconds / 3.0)
        self.lost = False
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                if not self.queue.renew(self.key, self.owner):
                    self.lost = True
                    log.warning("lost the lease on %s", self.key)
                    return
            except Exception:
                log.exception("could not renew the lease on %s", self.key)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)


# -- one run -----------------------------------------------------------------------------------------------


class Run:
    """The state of one run of one key (see the module docstring for the steps)."""

    def __init__(self, key: str, claim: Claim, queue: WorkQueue, renewer: LeaseRenewer) -> None:
        self.key = key
        self.claim = claim
        self.queue = queue
        self.renewer = renewer
        self.started_at = timezone.now()
        self.t0 = time.monotonic()
        self.status_conflicts = 0

    def execute(self) -> str:
        try:
            reconciler = registry.for_key(self.key)
        except (registry.UnknownKind, ValueError) as exc:
            log.error("dropping %s: %s", self.key, exc)
            self.queue.forget(self.key)
            return "error"
        self.reconciler = reconciler
        self.machine: StateMachine = reconciler.state_machine
        self.request = Request.from_key(self.key)
        self.error_class = ""
        self.phases: tuple[str, str] | None = None
        _active(reconciler, +1)
        try:
            with _span(f"reconcile {reconciler.resource.kind}", self.key) as span:
                self.span = span
                self.trace_id = _trace_id(span)
                try:
                    result = self._execute(span)
                except Exception as exc:
                    result = self._failed(exc)
                _span_result(span, result, self.error_class, self.phases)
        finally:
            _active(reconciler, -1)
        _observe(reconciler, result, time.monotonic() - self.t0, self.claim, self.error_class)
        return result

    def _execute(self, span: Any) -> str:
        kind = self.reconciler.resource
        api = apiclient.get_api_client()
        try:
            obj = kube.get_object(api, kind, self.request.namespace or None, self.request.name)
        except Exception as exc:
            delay = self.queue.add_rate_limited(self.key)
            _retried(self.reconciler)
            self.error_class = "ApiError" if isinstance(exc, kube.ApiException) else type(exc).__name__
            log.warning("GET %s failed (%s); retrying in %.3fs", self.key, exc, delay)
            self._record_unobserved(f"GET failed: {exc}"[:2000])
            return "error"
        if obj is None:
            self._gone()
            self.queue.forget(self.key)
            return "success"

        ctx = EngineContext(self.reconciler, obj, api, request=self.request, span=span,
                            log=logging.getLogger(f"reconcilers.{self.reconciler.name}"))
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        _span_object(span, kind.kind, meta, generation)
        recorded = _recorded_phase(meta["uid"])
        token = _unhandled_token(obj)
        if token:
            _requests_picked_up(self.key, token)
            _span_request_traces(span, self.key, token, self.trace_id)

        decision = self._decide(ctx, recorded)
        written = ctx.obj
        change: recording.PhaseChange | None = None
        if self.renewer.lost:
            decision = Decision("error", error_class="LeaseLost", error_message="the lease expired during the run",
                                forget=False)
            token = None
        else:
            try:
                written = self._write_status(ctx, decision, generation, token)
                if decision.phase:
                    change = recording.PhaseChange(decision.phase, decision.reason, decision.message)
            except Exception as exc:
                log.warning("status write for %s failed: %s", self.key, exc)
                decision = Decision("error", rate_limited=True, forget=False, error_class=type(exc).__name__,
                                    error_message=str(exc)[:2000])

        outcome = recording.reconcile_record(
            recording.RunRecord(
                key=self.key,
                kind=self.reconciler.resource.kind,
                started_at=self.started_at,
                duration_seconds=time.monotonic() - self.t0,
                result=decision.result,
                error_class=decision.error_class,
                error_message=decision.error_message,
                attempt=self.claim.failures + 1,
                worker=_worker(),
                trace_id=self.trace_id,
                request_token=token,
            ),
            observed(self.reconciler, written),
            change,
            self.machine,
        )
        self.error_class = decision.error_class
        self.phases = (outcome.from_phase, outcome.to_phase)
        self._post_events(ctx, outcome)

        if decision.remove_finalizer and self.reconciler.finalizer:
            try:
                ctx.remove_finalizer(self.reconciler.finalizer)
            except Exception as exc:
                log.warning("removing the finalizer of %s failed: %s", self.key, exc)
                decision.rate_limited = True
        self._queue_after(decision)
        return decision.result

    def _failed(self, exc: Exception) -> str:
        """The run broke outside the reconcile itself (the database or Redis away): nothing of it was recorded
        (the recording is one transaction), so the key is retried with backoff, as an error would be. Without
        this the key was dropped until the next resync."""
        self.error_class = type(exc).__name__
        try:
            delay = self.queue.add_rate_limited(self.key)
        except Exception:  # Redis too: the lease expires and reap_expired() re-queues the key
            log.warning("%s: the run failed (%s: %s) and no retry could be queued", self.key, self.error_class, exc,
                        exc_info=True)
            return "error"
        _retried(self.reconciler)
        log.warning("%s: the run failed (%s: %s); retrying in %.3fs", self.key, self.error_class, exc, delay)
        return "error"

    def _record_unobserved(self, message: str) -> None:
        """The run that could not read its object is on record too (best effort: the database may be
        what failed)."""
        try:
            recording.run_record_unobserved(recording.RunRecord(
                key=self.key, kind=self.reconciler.resource.kind, started_at=self.started_at,
                duration_seconds=time.monotonic() - self.t0, result="error", error_class=self.error_class,
                error_message=message, attempt=self.claim.failures + 1, worker=_worker(), trace_id=self.trace_id))
        except Exception:
            log.warning("could not record the failed run of %s", self.key, exc_info=True)

    # -- deciding ------------------------------------------------------------------------------------------

    def _decide(self, ctx: EngineContext, recorded: str | None) -> Decision:
        obj = ctx.obj
        live = (obj.get("status") or {}).get("phase") or ""
        deleting = bool(obj["metadata"].get("deletionTimestamp"))
        try:
            if deleting:
                return self._deletion(ctx, recorded if recorded is not None else live)
            if self.reconciler.finalizer:
                ctx.add_finalizer(self.reconciler.finalizer)
            result = self.reconciler.reconcile(ctx, ctx.obj)
            if not isinstance(result, Result):
                raise TypeError(f"{type(self.reconciler).__name__}.reconcile returned {type(result).__name__}, "
                                "not a Result")
        except TemporaryError as exc:
            log.info("%s: temporary error (%s), retrying in %.1fs", self.key, exc.message, exc.delay)
            return Decision("error", requeue_after=exc.delay, forget=False, error_class="TemporaryError",
                            error_message=f"{exc.reason}: {exc.message}")
        except PermanentError as exc:
            failed = self.reconciler.failed_phase
            if deleting or failed not in self.machine.states:  # cleanup cannot give up: keep retrying
                return Decision("error", rate_limited=True, forget=False, error_class="PermanentError",
                                error_message=f"{exc.reason}: {exc.message}")
            log.info("%s: permanent error %s: %s", self.key, exc.reason, exc.message)
            return Decision("error", phase=failed, reason=exc.reason, message=exc.message,
                            error_class="PermanentError", error_message=f"{exc.reason}: {exc.message}")
        except Exception as exc:
            log.warning("%s: reconcile raised %s: %s", self.key, type(exc).__name__, exc, exc_info=True)
            return Decision("error", rate_limited=True, forget=False, error_class=type(exc).__name__,
                            error_message=str(exc)[:2000])
        return self._from_result(result, recorded, live, ctx.obj)

    def _from_result(self, result: Result, recorded: str | None, live: str, obj: dict[str, Any]) -> Decision:
        target = result.phase or live or recorded or self.machine.initial
        label = "requeue_after" if result.requeue_after is not None else "requeue" if result.requeue else "success"
        decision = Decision(label, phase=target, reason=result.reason, message=result.message,
                            conditions=list(result.conditions), extra=dict(result.status),
                            requeue_after=result.requeue_after, rate_limited=result.requeue and
                            result.requeue_after is None, forget=not result.requeue)
        if catch_up_needed(self.machine, recorded, live, target):
            status = obj.get("status") or {}
            log.info("%s: recording %s first (written by an earlier run that was not recorded)", self.key, live)
            decision.phase, decision.reason, decision.message = live, status.get("reason") or "", status.get(
                "message") or ""
            decision.conditions = []
            decision.result, decision.requeue_now, decision.rate_limited, decision.requeue_after = (
                "requeue", True, False, None)
        return decision

    def _deletion(self, ctx: EngineContext, current: str) -> Decision:
        rec = self.reconciler
        states = self.machine.states
        terminating = rec.terminating_phase if rec.terminating_phase in states else None
        deleted = rec.deleted_phase if rec.deleted_phase in states else None
        fin = rec.finalizer
        has_finalizer = bool(fin) and fin in (ctx.obj["metadata"].get("finalizers") or [])
        if terminating and current not in (terminating, deleted):
            return Decision("requeue" if has_finalizer else "success", phase=terminating, reason="Deleting",
                            message="deletion requested" + ("; cleaning up" if has_finalizer else ""),
                            requeue_now=has_finalizer)
        if not has_finalizer:
            return Decision("success")  # someone else's finalizers, or the garbage collector, finish it
        if deleted and current == deleted:  # cleanup was recorded; only the finalizer is left
            return Decision("success", remove_finalizer=True)
        result = rec.finalize(ctx, ctx.obj)
        if result is not None and (result.requeue or result.requeue_after is not None):
            return Decision("requeue_after" if result.requeue_after is not None else "requeue",
                            phase=terminating, reason=result.reason or "CleaningUp",
                            message=result.message or "cleaning up", requeue_after=result.requeue_after,
                            rate_limited=result.requeue and result.requeue_after is None,
                            forget=not result.requeue)
        return Decision("success", phase=deleted, reason="Finalized", message="cleanup finished; finalizer removed",
                        remove_finalizer=True)

    # -- writing -------------------------------------------------------------------------------------------

    def _write_status(self, ctx: EngineContext, decision: Decision, generation: int,
                      token: str | None) -> dict[str, Any]:
        """Write the decision's status (with the resourceVersion read; 409 → re-read, rebuild, retry).
        Returns the object as written (or as read when nothing needed writing)."""
        kind = self.reconciler.resource
        path = kube.object_path(kind, self.request.namespace or None, self.request.name, "status")
        for _attempt in range(STATUS_ATTEMPTS):
            new = build_status(self.reconciler, ctx.obj.get("status") or {}, decision, generation, token)
            if new is None:
                return ctx.obj
            body = {**ctx.obj, "status": new}
            try:
                written = kube.request_json(ctx.api_client, "PUT", path, body=body)
            except kube.ApiException as exc:
                if exc.status == 409:
                    self.status_conflicts += 1
                    log.info("%s: status write conflict (409), re-reading", self.key)
                    if ctx.refresh() is None:
                        return ctx.obj
                    continue
                if exc.status == 404:
                    return ctx.obj
                raise
            ctx.obj = written
            return written
        raise StatusConflict(f"status write of {self.key} met 409 Conflict {STATUS_ATTEMPTS} times")

    def _post_events(self, ctx: EngineContext, outcome: recording.RecordOutcome) -> None:
        warning = {self.reconciler.failed_phase, *getattr(self.reconciler, "warning_phases", ("Degraded",))}
        for row in outcome.transitions:  # as committed, in order
            reason = condition_reason(row.reason or "", row.to_phase)
            text = f"{row.from_phase or '(new)'} -> {row.to_phase}"
            ctx.event("Warning" if row.to_phase in warning else "Normal", reason,
                      f"{text}: {row.message}" if row.message else text)
        if outcome.anomaly_id is not None:
            ctx.event("Warning", "IllegalTransition", f"refused {outcome.from_phase or '(none)'} -> "
                      f"{outcome.to_phase}: the state machine does not allow it (anomaly {outcome.anomaly_id})")

    def _queue_after(self, decision: Decision) -> None:
        if decision.rate_limited:
            delay = self.queue.add_rate_limited(self.key)
            _retried(self.reconciler)
            log.info("%s: %s, retrying in %.3fs", self.key, decision.error_class or decision.result, delay)
            return
        if decision.forget:
            self.queue.forget(self.key)
        if decision.requeue_now:
            self.queue.add(self.key)  # processing: marked dirty, dispatched by done()
        elif decision.requeue_after is not None:
            self.queue.add_after(self.key, decision.requeue_after)
            if decision.result == "error":  # a TemporaryError's retry
                _retried(self.reconciler)

    def _gone(self) -> None:
        from reconcilers.models import Resource

        for uid in Resource.objects.filter(key=self.key, deleted=False).values_list("uid", flat=True):
            recording.resource_mirror_mark_deleted(uid)


# -- pieces (pure functions, tested on their own) --------------------------------------------------------


def catch_up_needed(machine: StateMachine, recorded: str | None, live: str, target: str) -> bool:
    """True when the live status shows a phase the database has not recorded (a run wrote it and died
    before its commit) and this run would move on from it: that phase must be recorded first."""
    return bool(recorded) and bool(live) and live not in (recorded, target) \
        and machine.allows(recorded, live) and machine.allows(live, target)


def build_status(
    reconciler: Reconciler,
    old: dict[str, Any],
    decision: Decision,
    generation: int,
    token: str | None,
    now: str | None = None,
) -> dict[str, Any] | None:
    """The status to write for `decision` over `old`, or None when it would change nothing."""
    new = dict(old)
    if decision.phase:
        for name, value in decision.extra.items():
            if value is None:
                new.pop(name, None)
            else:
                new[name] = value
        new["phase"] = decision.phase
        new["reason"] = decision.reason
        new["message"] = decision.message
        new["observedGeneration"] = generation
        new["conditions"] = kstatus_conditions(reconciler, old.get("conditions") or [], decision.phase,
                                               decision.reason, decision.message, decision.conditions, generation,
                                               now or now_rfc3339())
    if token:
        new["lastHandledReconcileAt"] = token
    return None if new == old else new


def observed(reconciler: Reconciler, obj: dict[str, Any]) -> recording.ObservedObject:
    """What the recording keeps of the live object."""
    return recording.ObservedObject.from_api(reconciler.resource, obj)


def _unhandled_token(obj: dict[str, Any]) -> str | None:
    token = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if token and token != (obj.get("status") or {}).get("lastHandledReconcileAt"):
        return str(token)
    return None


def _recorded_phase(uid: str) -> str | None:
    """The phase the database recorded for the object (None when it has no row yet)."""
    from reconcilers.models import Resource

    return Resource.objects.filter(uid=uid).values_list("phase", flat=True).first()


def _requests_picked_up(key: str, token: str) -> None:
    """Mark the manual requests this run handles as picked up (guarded: only rows still `requested`)."""
    from reconcilers.models import ReconcileRequest, RequestState

    ReconcileRequest.objects.filter(key=key, token=token, state=RequestState.REQUESTED).update(
        state=RequestState.PICKED_UP, picked_up_at=timezone.now()
    )


# -- telemetry (no-op unless configured) --------------------------------------------------------------------


class _span:
    """A span named `name` when OpenTelemetry is set up; a no-op span otherwise."""

    def __init__(self, name: str, key: str) -> None:
        self.name, self.key = name, key
        self._cm: Any = None

    def __enter__(self) -> Any:
        try:
            from opentelemetry import trace

            self._cm = trace.get_tracer("opsconsole.reconcilers").start_as_current_span(
                self.name, attributes={"opsconsole.key": self.key})
            return self._cm.__enter__()
        except Exception:
            self._cm = None
            return None

    def __exit__(self, *exc: Any) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)


def _trace_id(span: Any) -> str:
    try:
        ctx = span.get_span_context()
        return format(ctx.trace_id, "032x") if ctx.is_valid else ""
    except Exception:
        return ""


def _span_object(span: Any, kind: str, meta: dict[str, Any], generation: int) -> None:
    """The reconcile span's object attributes (no-op span: nothing)."""
    if span is None or not span.is_recording():
        return
    span.set_attributes({
        "opsconsole.kind": kind,
        "opsconsole.namespace": meta.get("namespace") or "",
        "opsconsole.name": meta.get("name") or "",
        "opsconsole.uid": meta.get("uid") or "",
        "opsconsole.generation": generation,
    })


def _span_request_traces(span: Any, key: str, token: str, trace_id: str) -> None:
    """When the manual request this run handles was made in another trace (its enqueue was coalesced with
    a task already queued), name that trace on the reconcile span."""
    if span is None or not span.is_recording():
        return
    from reconcilers.models import ReconcileRequest

    others = (ReconcileRequest.objects.filter(key=key, token=token).exclude(trace_id__in=("", trace_id))
              .values_list("trace_id", flat=True))
    if others:
        span.set_attribute("opsconsole.request.trace_id", list(others))


def _span_result(span: Any, result: str, error_class: str, phases: tuple[str, str] | None) -> None:
    """The reconcile span's outcome: result, recorded phase from/to, error status."""
    if span is None or not span.is_recording():
        return
    span.set_attribute("opsconsole.result", result)
    if phases is not None:
        span.set_attribute("opsconsole.phase.from", phases[0])
        span.set_attribute("opsconsole.phase.to", phases[1])
    if result == "error":
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, error_class or "error"))


def _active(reconciler: Reconciler, delta: int) -> None:
    """controller_runtime_active_workers (best effort)."""
    try:
        from reconcilers.engine import metrics

        metrics.ACTIVE_WORKERS.labels(reconciler.name).inc(delta)
    except Exception:
        log.debug("metrics not recorded", exc_info=True)


def _retried(reconciler: Reconciler) -> None:
    """workqueue_retries_total: the key goes back with a delay because the run failed (best effort)."""
    try:
        from reconcilers.engine import metrics

        metrics.WORKQUEUE_RETRIES.labels(reconciler.name, reconciler.name).inc()
    except Exception:
        log.debug("metrics not recorded", exc_info=True)


def _observe(reconciler: Reconciler, result: str, seconds: float, claim: Claim, error_class: str = "") -> None:
    """controller-runtime's reconcile metrics, and ours for failures (best effort)."""
    try:
        from reconcilers.engine import metrics

        name = reconciler.name
        metrics.RECONCILE_TOTAL.labels(name, result).inc()
        metrics.RECONCILE_TIME.labels(name).observe(seconds)
        if result == "error":
            metrics.RECONCILE_ERRORS.labels(name).inc()
            metrics.RECONCILE_FAILURES.labels(name, metrics.failure_reason(error_class)).inc()
            if error_class == "PermanentError":
                metrics.TERMINAL_RECONCILE_ERRORS.labels(name).inc()
        metrics.WORKQUEUE_QUEUE_DURATION.labels(name, name).observe(max(0.0, claim.claimed_at - claim.queued_at))
        metrics.WORKQUEUE_WORK_DURATION.labels(name, name).observe(seconds)
    except Exception:
        log.debug("metrics not recorded", exc_info=True)
