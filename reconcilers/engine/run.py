"""One run of one claimed key: `Run(claim, …).execute()` → its result label; the caller holds the lease
(`reconcilers.engine.claimed`). It orchestrates; each decision is made by the module that owns it:

1. Read (`run_read.ObjectRead`): the object and its state on record (`objectcache.read`: the claim's cached
   object, or a GET); gone → the mirror marked deleted; suspended → not reconciled, looked at again at expiry
   (`healing.suspend`).
2. Step (`step.reconcile_step`): the reconcile and the status write → an `Outcome` with one queue action; a
   manual request (`annotation_requests.request_annotations`) gets its row first.
3. Record (`recording.reconcile_record`, one transaction): the run, transitions, the mirror, requests, a
   rollback's verification (a concluded one runs the key once more, to write its conditions).
4. Complete (`step.complete`): the Events of what was recorded (`record_events`), the finalizer removed when the
   cleanup is done.
5. Queue (`run_queue.QueueActions`): the outcome's `QueueAction`; a forget or RequeueAfter goes with the lease's
   release. A run that breaks outside the reconcile (the database away: nothing recorded) is an error retried with
   backoff too.
6. Telemetry (`run_telemetry.RunTelemetry`): the span `reconcile <Kind>` (tail sampling:
   `sampling.keep_notable`), the object read and the child applies (`metrics.child_applies_observed`),
   controller-runtime's metrics at the end. The span starts when the run does (its claim) and each part is its
   child: `read`, `step`, `record` (holding `record reconcile`, the transaction), `complete`, `keep` (a kept run's
   inputs), `queue`; the wait before the claim is its `queued` and `claimed` events and
   `opsconsole.queue.wait_seconds`. The run's recorded duration is the span's start to the start of `record
   reconcile` (read, step, the row prepared: what a reconcile took until it was recorded), named on the span as
   `opsconsole.run.duration_seconds`; the span goes on through record, complete, keep, queue.

Why it ran: the triggers the claim took (`reconcilers.engine.triggers`) are completed from the record
(`trigger_actors.resolve`), set on the span and recorded with the run; a trigger the controller marked as a loop
gets its anomaly; a run that puts its key back notes why (a `requeue` trigger for the next run).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from django.conf import settings
from django.utils import timezone
from opentelemetry.trace import Status, StatusCode

from reconcilers.core.types import Request
from reconcilers.engine import (
    apiclient,
    metrics,
    objectcache,
    provenance,
    record_events,
    recording,
    registry,
    run_keep,
    sampling,
    step,
    trigger_actors,
    triggers,
    versions,
)
from reconcilers.engine.annotation_requests import request_annotations
from reconcilers.engine.healing import state as healing_state
from reconcilers.engine.healing import suspend
from reconcilers.engine.lease_renewal import LeaseRenewer
from reconcilers.engine.run_queue import QueueActions
from reconcilers.engine.run_read import NotRead, ObjectRead
from reconcilers.engine.run_telemetry import RunTelemetry
from reconcilers.engine.step import QueueAction
from reconcilers.engine.workqueue import Claim, WorkQueue

SUSPENDED = "suspended"  # the object's reconciles are suspended (not a run: nothing is recorded)

log = logging.getLogger(__name__)


def worker() -> str:
    """`host:pid` of this process (computed per call: prefork children are forked after import)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Run(ObjectRead, RunTelemetry, QueueActions):
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
        self.run_id: int | None = None  # the run's row, once recorded
        self.read_from = objectcache.API  # where the object came from (objectcache.CACHE, API or STALE)
        self.result = "error"  # the run's result label, once it ended
        self.triggers, self.triggers_dropped = triggers.decode(claim.why)  # why it runs

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
        try:
            with sampling.tracer("opsconsole.reconcilers").start_as_current_span(
                    f"reconcile {reconciler.resource.kind}", start_time=self.t0_ns, attributes={
                        "opsconsole.key": self.key,
                        **trigger_actors.span_attributes(self.triggers, self.triggers_dropped)}) as span:
                self.trace_id = sampling.sampled_trace_id(span)  # '' when this run is not sampled
                self._queue_wait(span)
                try:
                    with provenance.in_cluster(self.request.cluster):  # admitted writes: the key's cluster's
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
        with self._part(span, "read"):  # the object, its state on record, its suspension
            try:  # the client of the key's cluster: one this process cannot reach fails the run, never another's
                api = apiclient.get_api_client(self.request.cluster)
            except apiclient.UnknownCluster as exc:
                return self._unreachable_cluster(exc)
            try:
                obj, state = self._read(api)
            except NotRead as stop:
                return stop.result
            span.set_attributes({**self._attributes(obj), "opsconsole.read": self.read_from})
            if state is None and suspend.annotated(obj) is not None:  # a suspension needs a record to be on
                recording.resource_mirror_upsert(rec.resource, obj, self.request.cluster)
                state = healing_state.resource_state(obj["metadata"]["uid"], head=True)
            check = suspend.suspension_check(api, rec, obj, state)
            if check.skip:
                span.set_attribute("opsconsole.suspended", True)
                self.queue.forget(self.key)
                if (after := check.look_again_after) is not None:
                    self.queue.add_after(self.key, after)
                return SUSPENDED
        obj = check.obj
        recorded = state.phase if state is not None else None
        with self._part(span, "step"):  # a request taken up, the reconcile and status write, what it wrote noted
            annotations = request_annotations()
            if asked := step.unhandled_request(obj, annotations):
                # an annotation set by someone else than opsconsole (kubectl annotate, flux) gets its request row
                others = recording.request_taken_up(self.key, obj, *asked,
                                                    trace_id=self.trace_id if span.is_recording() else None)
                if others:
                    span.set_attribute("opsconsole.request.trace_id", others)
            children = objectcache.child_cache(self.queue, recorded, self.request.cluster)
            with run_keep.RunKeeper(rec, self.key, obj, recorded, self.queue) as keeper:  # inputs, verbosity
                outcome = step.reconcile_step(rec, api, obj, recorded, span=span,
                                              lease_held=lambda: not self.renewer.lost,
                                              request_annotations=annotations,
                                              healing=healing_state.healing_view(state, obj),
                                              child_cache=children,
                                              engine_wrote=provenance.engine_wrote_checker(self.queue.redis),
                                              request=self.request)
            provenance.outcome_noted(self.queue.redis, rec.resource, obj, recorded, outcome)
            if self.triggers:
                self.triggers = trigger_actors.resolve(rec.resource, obj, self.triggers,
                                                       state.rollback if state is not None else None)
                span.set_attributes(trigger_actors.span_attributes(self.triggers, self.triggers_dropped))
        sent, unchanged = (outcome.ctx.applies_sent, outcome.ctx.applies_unchanged) if outcome.ctx else (0, 0)
        if sent or unchanged:
            span.set_attributes({"opsconsole.children.applied": sent, "opsconsole.children.unchanged": unchanged})
            metrics.child_applies_observed(rec.name, sent, unchanged)
        if not span.is_recording():
            self._keep_notable(outcome.result, outcome.error_class, outcome.token, {
                **self._attributes(obj), "opsconsole.error": f"{outcome.error_class}: {outcome.error_message}"[:500]
                if outcome.error_class else ""})
        with self._part(span, "record"):  # the run's row (its operator version looked up), transitions, mirror
            observed = recording.ObservedObject.from_api(rec.resource, outcome.obj, self.request.cluster)
            run_record = self._run_record(outcome.result, outcome.error_class, outcome.error_message, outcome.token)
            span.set_attribute("opsconsole.run.duration_seconds", run_record.duration_seconds)
            record = recording.reconcile_record(
                run_record, observed, outcome.change, rec.state_machine, live=outcome.obj,
                out_of_band=outcome.out_of_band, reconciler=rec, head=state.head if state is not None else None)
        self.error_class = outcome.error_class
        span.set_attributes({"opsconsole.phase.from": record.from_phase, "opsconsole.phase.to": record.to_phase})
        with self._part(span, "complete"):  # the Events of what was recorded, a loop's anomaly
            step.complete(outcome, record_events.recorded_events(rec, outcome, record))
            if any(t.get("loop") for t in self.triggers):
                loops = trigger_actors.loops_recorded(obj["metadata"].get("uid") or "", self.triggers, rec.name)
                span.set_attribute("opsconsole.anomaly.loop", loops)
        self.run_id = record.run_id
        with self._part(span, "keep"):  # a kept run keeps its inputs for a replay; a verbose one its lines
            keeper.kept(record.run_id, outcome, bool(self.trace_id) or bool(sampling.why_keep(
                outcome.result, run_record.duration_seconds,
                float(getattr(settings, "OPSCONSOLE_TRACE_SLOW_SECONDS", 1.0)), outcome.token is not None)))
        with self._part(span, "queue"):
            self._queue(outcome)
        if record.rollback_concluded:
            span.set_attribute("opsconsole.rollback", record.rollback_concluded)
            self.queue.add(self.key)  # the next run writes the rollback's conditions
        return outcome.result

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

    def _run_record(self, result: str, error_class: str, error_message: str, token: str | None = None
                    ) -> recording.RunRecord:
        version = versions.operator_version(self.reconciler)  # the first of a process looks it up (~0.1 s)
        return recording.RunRecord(key=self.key, kind=self.reconciler.resource.kind, started_at=self.started_at,
                                   duration_seconds=time.monotonic() - self.t0, result=result,
                                   error_class=error_class, error_message=error_message,
                                   attempt=self.claim.failures + 1, worker=worker(), trace_id=self.trace_id,
                                   request_token=token, operator_version=version,
                                   triggers=self.triggers, triggers_dropped=self.triggers_dropped)

