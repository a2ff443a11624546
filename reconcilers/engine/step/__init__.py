"""One reconcile of one object, as a step: (reconciler, API client, live object, phase on record) → `Outcome`.

It imports no Django, Celery or Redis. The runner (`reconcilers.engine.runner`) wraps it with the lease, the
database record and the workqueue; the kopf side of `bench/converge` and a kind author's tests call it as it is.

`reconcile_step` decides, then writes the status:
- Being deleted, with the reconciler's finalizer: → Terminating (run again at once), `finalize()` until it
  says done, → Deleted, then the finalizer goes (in `complete`, once the caller has recorded Deleted: the
  object vanishes with its last finalizer). Without the finalizer: → Terminating and nothing more.
- Otherwise the spec is validated with the kind's `spec_model` (a bad one is a PermanentError InvalidSpec naming
  each field) and handed over as `ctx.spec`, the reconciler's finalizer is added and `reconcile(ctx, obj)`
  runs: a Result → its phase (through the kind's `spec_change_phase` first when the generation moved);
  `TemporaryError` → retry after its delay, nothing Failed; `PermanentError` → the failed phase with its
  reason, no retry (a malformed spec is one of these, never a crash); any other exception → per-key backoff.
- Catch-up: when the live status shows a phase that is not on record (a run wrote it and died before its
  record) and this run would move on from it, that phase is recorded first and the key runs again at once,
  so that no transition is lost and none is doubled. Only a phase the engine can prove it wrote is caught up:
  the caller's `engine_wrote(obj)` (`provenance.engine_wrote_checker`: the note of what the engine's own status
  write returned) is asked, only when the live phase is not the one on record. Any other unrecorded phase is an
  out-of-band change (`Outcome.out_of_band`), whatever field manager managedFields name (a name anyone may
  send, kept as a claim): the run decides from the phase on record, never from it, and writes the phase the
  reconciler concludes. `Outcome.written` is (resourceVersion, phase) of this run's own status write, for the
  caller to note.
- A rollback being verified (`HealingView`, from the record): the first run of the restored generation records
  the kind's `rollback_phase` (reason RollingBack) and runs again at once; the object stays in it until the
  reconcile concludes a ready phase or the failed one; those transitions carry the rollback as actor
  (`rollback:auto`, `rollback:user:<name>`). The conditions healing keeps on the object (AnomalyDetected,
  RollingBack, RollbackFailed) are written with every status write.
- The status goes through `/status` with the resourceVersion read (409 → re-read, rebuild, retry): phase,
  reason, message, observedGeneration, kstatus conditions, the reconciler's own fields and conditions, and
  `lastHandledReconcileAt` when the run handled a manual request. Nothing changed → nothing written. A run
  whose lease was lost meanwhile (`lease_held()` false) writes nothing.

The `Outcome` says what happened and what the queue must do (`QueueAction`). `complete(outcome)` runs after
the caller has recorded it: it posts the Events (one per transition) and removes the finalizer when due.
Result labels are controller-runtime's: success / error / requeue / requeue_after.

The step is a package, one module per concern, all of them under the contract above: `outcome` (what a step
concludes), `decide` (the decision before the status write), `transitions` (the manual request, the record's
transitions and their Events), `status` (building and writing the status); this module runs them in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Request
from reconcilers.engine.childcache import ChildCache
from reconcilers.engine.context import EngineContext
from reconcilers.engine.step.decide import DELETING, SPEC_CHANGED, catch_up_needed, decide
from reconcilers.engine.step.outcome import (
    Decision,
    EventSpec,
    HealingView,
    Outcome,
    OutOfBand,
    PhaseChange,
    PlannedTransition,
    QueueAction,
    out_of_band,
)
from reconcilers.engine.step.status import STATUS_ATTEMPTS, StatusConflict, build_status, merge_conditions, write_status
from reconcilers.engine.step.transitions import (
    REQUEST_ANNOTATIONS,
    events_for,
    plan_transitions,
    refused_event,
    unhandled_request,
    unhandled_token,
)

_decide = decide  # the name tests and earlier callers use
_Decision = Decision

__all__ = [
    "DELETING", "REQUEST_ANNOTATIONS", "SPEC_CHANGED", "STATUS_ATTEMPTS", "EventSpec", "HealingView", "OutOfBand",
    "Outcome", "PhaseChange", "PlannedTransition", "QueueAction", "StatusConflict", "build_status",
    "catch_up_needed", "complete", "events_for", "merge_conditions", "out_of_band", "plan_transitions",
    "reconcile_step", "refused_event", "unhandled_request", "unhandled_token",
]

log = logging.getLogger(__name__)


def reconcile_step(
    reconciler: Reconciler,
    api: Any,
    obj: dict[str, Any],
    recorded: str | None,
    *,
    span: Any = None,
    lease_held: Callable[[], bool] | None = None,
    request_annotations: tuple[str, ...] = REQUEST_ANNOTATIONS,
    healing: HealingView | None = None,
    child_cache: ChildCache | None = None,
    engine_wrote: Callable[[dict[str, Any]], bool] | None = None,
    request: Request | None = None,
) -> Outcome:
    """Reconcile the live object `obj` once and write its status (see the module docstring). `recorded` is
    the phase on record (None: the object has no record yet); `request_annotations` the annotations that ask
    for a manual reconcile; `healing` what the record says about a rollback and healing's conditions;
    `child_cache` the object cache's children (`EngineContext.apply_child` skips the applies that would change
    nothing); `engine_wrote(obj)` whether the engine can prove it wrote the live phase (asked only when that
    phase is not the one on record; without it nothing is proven: no catch-up); `request` the run's key (its cluster
    included; None: the object's, in the default cluster), as the reconciler's `ctx.request`."""
    ctx = EngineContext(reconciler, obj, api, request=request, span=span, child_cache=child_cache)
    generation = int(obj["metadata"].get("generation") or 0)
    asked = unhandled_request(obj, request_annotations)
    token = asked[1] if asked else None
    live_phase = (obj.get("status") or {}).get("phase") or ""
    ours = bool(live_phase) and live_phase != (recorded or "") and engine_wrote is not None and engine_wrote(obj)
    foreign = out_of_band(obj, recorded, ours)
    if foreign is not None:
        ctx.log.warning("%s: status.phase %s was not written by the engine (field manager %r, a claim): not built "
                        "on", ctx.request, foreign.phase, foreign.manager)
    decision = decide(ctx, recorded, foreign is not None, healing)
    conflicts, written = 0, None
    if lease_held is not None and not lease_held():
        decision = Decision("error", QueueAction.KEEP, error_class="LeaseLost",
                             error_message="the lease expired during the run")
        token = None
    else:
        try:
            conflicts, written = write_status(ctx, decision, generation, token,
                                               healing.conditions if healing else ())
        except Exception as exc:
            log.warning("status write for %s failed: %s", ctx.request, exc)
            decision = Decision("error", QueueAction.BACKOFF, error_class=type(exc).__name__,
                                 error_message=str(exc)[:2000])
    outcome = Outcome(decision.result, ctx.obj, decision.queue, decision.delay, decision.change, token=token,
                      token_annotation=asked[0] if asked and token else "", out_of_band=foreign,
                      children=list(ctx.children), error_class=decision.error_class,
                      error_message=decision.error_message, remove_finalizer=decision.remove_finalizer,
                      status_conflicts=conflicts, ctx=ctx, written=written)
    if decision.change is not None:
        outcome.transitions, outcome.refused = plan_transitions(reconciler.state_machine, recorded, decision.change)
        outcome.events = events_for(reconciler, outcome.transitions)
        if outcome.refused:
            outcome.events.append(refused_event(recorded or "", decision.change.to_phase))
    return outcome


def complete(outcome: Outcome, events: Sequence[EventSpec] | None = None) -> Outcome:
    """After the caller recorded `outcome`: post `events` (default: the outcome's own; best effort) and remove
    the finalizer when the cleanup finished (a failure to remove it → BACKOFF)."""
    ctx = outcome.ctx
    if ctx is None:
        return outcome
    for event in outcome.events if events is None else events:
        ctx.event(event.type, event.reason, event.message)
    if outcome.remove_finalizer and ctx.reconciler.finalizer:
        try:
            ctx.remove_finalizer(ctx.reconciler.finalizer)
        except Exception as exc:
            log.warning("removing the finalizer of %s failed: %s", ctx.request, exc)
            outcome.queue, outcome.delay = QueueAction.BACKOFF, None
    return outcome
