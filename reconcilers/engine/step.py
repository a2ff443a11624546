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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from reconcilers.core import actors
from reconcilers.core.kind import validate_spec
from reconcilers.core.meta import (
    FIELD_MANAGER,
    FLUX_REQUESTED_AT,
    LAST_HANDLED_RECONCILE_AT,
    RECONCILE_REQUESTED_AT,
    last_writer,
    now_rfc3339,
    request_annotation,
)
from reconcilers.core.reconciler import Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Condition, PermanentError, Result, TemporaryError
from reconcilers.engine import kube
from reconcilers.engine.childcache import ChildCache
from reconcilers.engine.context import EngineContext
from reconcilers.engine.kstatus import condition_reason, kstatus_conditions

STATUS_ATTEMPTS = 5
SPEC_CHANGED = "SpecChanged"
#: the reason of the change into the terminating phase a deletion request starts (its actor is who deleted the
#: object, `provenance.outcome_noted`; the cleanup's transitions after it are the engine's)
DELETING = "Deleting"
#: the annotations that ask for a manual reconcile (the runner passes what the settings allow)
REQUEST_ANNOTATIONS: tuple[str, ...] = (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT)

log = logging.getLogger(__name__)


class QueueAction(Enum):
    """What the workqueue does with the key once the run is recorded."""

    FORGET = "forget"  # done until the next event: the key's failure count is reset
    REQUEUE_NOW = "requeue_now"  # run again as soon as this run ends (a step of a multi-step flow)
    REQUEUE_AFTER = "requeue_after"  # run again after `Outcome.delay` seconds (RequeueAfter); failures reset
    RETRY_AFTER = "retry_after"  # a TemporaryError: again after its `Outcome.delay`, failures kept
    BACKOFF = "backoff"  # an error or Requeue: again after the per-key exponential backoff
    KEEP = "keep"  # leave the key alone: the lease was lost and its new holder decides


class StatusConflict(Exception):
    """The status write kept meeting 409 Conflict (the object changes faster than we can write)."""


@dataclass(frozen=True)
class PhaseChange:
    """The phase a reconcile concluded, with why. `actor` is 'controller', 'rollback:<who>', or, for a
    deletion, who deleted the object (`kube:<user>`, `unknown`): `reconcilers.core.actors`."""

    to_phase: str
    reason: str
    message: str
    actor: str = "controller"


@dataclass(frozen=True)
class HealingView:
    """What the record says about healing, for one run: the rollback whose restored generation is being
    verified (its transitions' actor, that generation, why) and the conditions healing keeps on the object."""

    rollback_actor: str = ""
    rollback_generation: int = 0
    rollback_message: str = ""
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class PlannedTransition:
    """One transition the record gets for a phase change, from the phase on record."""

    from_phase: str
    to_phase: str
    reason: str
    message: str


@dataclass(frozen=True)
class EventSpec:
    """A Kubernetes Event to post about the reconciled object."""

    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True)
class OutOfBand:
    """A live phase the engine cannot prove it wrote: what was written, and what managedFields *claim* about
    who (`manager`, `operation`, `time`, `subresource` of the entry that last wrote status.phase; '' without
    one). `established_by`: the actor the API server established for it (`kube:<user>`, set by the runner from
    an admitted write), '' while only the claim is known."""

    phase: str
    reason: str
    message: str
    manager: str
    operation: str = ""
    time: str = ""
    subresource: str = ""
    established_by: str = ""

    @property
    def actor(self) -> str:
        """`kube:<user>` when admission established it, else the claim `manager:<field manager>`."""
        return self.established_by or actors.manager_claim(self.manager)


def out_of_band(obj: dict[str, Any], recorded: str | None, ours: bool = False) -> OutOfBand | None:
    """The live phase when it differs from the phase on record and the engine cannot prove it wrote it (`ours`:
    the proof, from `provenance`); None otherwise. A field manager's name proves nothing either way."""
    status = obj.get("status") or {}
    live = status.get("phase") or ""
    if not live or live == (recorded or "") or ours:
        return None
    writer = last_writer(obj, ("status", "phase")) or {}
    return OutOfBand(live, str(status.get("reason") or ""), str(status.get("message") or ""),
                     str(writer.get("manager") or ""), str(writer.get("operation") or ""),
                     str(writer.get("time") or ""), str(writer.get("subresource") or ""))


@dataclass
class Outcome:
    """What one reconcile did and concluded."""

    result: str
    obj: dict[str, Any]  # the object as written (as read when nothing was written)
    queue: QueueAction
    delay: float | None = None  # seconds, for REQUEUE_AFTER and RETRY_AFTER
    change: PhaseChange | None = None  # the phase written (None: phase, reason and message left alone)
    transitions: list[PlannedTransition] = field(default_factory=list)  # from the phase on record
    refused: bool = False  # the state machine does not allow the change from the phase on record
    events: list[EventSpec] = field(default_factory=list)
    children: list[dict[str, Any]] = field(default_factory=list)  # the children applied, as the API returned them
    token: str | None = None  # the manual-reconcile token this run handled
    token_annotation: str = ""  # the annotation that carried it
    out_of_band: OutOfBand | None = None  # a live phase the engine did not write (not proven): not built on
    written: tuple[str, str] | None = None  # (resourceVersion, phase) this run's own status write returned
    error_class: str = ""
    error_message: str = ""
    remove_finalizer: bool = False
    status_conflicts: int = 0
    ctx: EngineContext | None = field(default=None, repr=False)

    @property
    def phase(self) -> str:
        """The object's phase after the run: the one written, or the live one when nothing changed."""
        if self.change is not None:
            return self.change.to_phase
        return str((self.obj.get("status") or {}).get("phase") or "")

    @property
    def status(self) -> dict[str, Any]:
        """The object's status after the run."""
        return dict(self.obj.get("status") or {})

    @property
    def conditions(self) -> dict[str, dict[str, Any]]:
        """The object's conditions after the run, by type."""
        return {c.get("type", ""): c for c in self.status.get("conditions") or [] if isinstance(c, dict)}


@dataclass
class _Decision:
    """What the reconcile concluded, before the status write."""

    result: str
    queue: QueueAction
    delay: float | None = None
    change: PhaseChange | None = None
    conditions: list[Condition] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    error_class: str = ""
    error_message: str = ""
    remove_finalizer: bool = False


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
) -> Outcome:
    """Reconcile the live object `obj` once and write its status (see the module docstring). `recorded` is
    the phase on record (None: the object has no record yet); `request_annotations` the annotations that ask
    for a manual reconcile; `healing` what the record says about a rollback and healing's conditions;
    `child_cache` the object cache's children (`EngineContext.apply_child` skips the applies that would change
    nothing); `engine_wrote(obj)` whether the engine can prove it wrote the live phase (asked only when that
    phase is not the one on record; without it nothing is proven: no catch-up)."""
    ctx = EngineContext(reconciler, obj, api, span=span, child_cache=child_cache)
    generation = int(obj["metadata"].get("generation") or 0)
    asked = unhandled_request(obj, request_annotations)
    token = asked[1] if asked else None
    live_phase = (obj.get("status") or {}).get("phase") or ""
    ours = bool(live_phase) and live_phase != (recorded or "") and engine_wrote is not None and engine_wrote(obj)
    foreign = out_of_band(obj, recorded, ours)
    if foreign is not None:
        ctx.log.warning("%s: status.phase %s was not written by the engine (field manager %r, a claim): not built "
                        "on", ctx.request, foreign.phase, foreign.manager)
    decision = _decide(ctx, recorded, foreign is not None, healing)
    conflicts, written = 0, None
    if lease_held is not None and not lease_held():
        decision = _Decision("error", QueueAction.KEEP, error_class="LeaseLost",
                             error_message="the lease expired during the run")
        token = None
    else:
        try:
            conflicts, written = _write_status(ctx, decision, generation, token,
                                               healing.conditions if healing else ())
        except Exception as exc:
            log.warning("status write for %s failed: %s", ctx.request, exc)
            decision = _Decision("error", QueueAction.BACKOFF, error_class=type(exc).__name__,
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


# -- deciding ----------------------------------------------------------------------------------------------


def _decide(ctx: EngineContext, recorded: str | None, foreign: bool = False,
            healing: HealingView | None = None) -> _Decision:
    rec, obj = ctx.reconciler, ctx.obj
    # a phase another field manager wrote is not the object's phase: decide from the one on record
    live = (recorded or "") if foreign else (obj.get("status") or {}).get("phase") or ""
    deleting = bool(obj["metadata"].get("deletionTimestamp"))
    try:
        if deleting:
            return _deletion(ctx, recorded if recorded is not None else live)
        if rec.spec_model is not None:
            ctx.spec = validate_spec(rec.spec_model, ctx.obj)
        if rec.finalizer:
            ctx.add_finalizer(rec.finalizer)
        result = rec.reconcile(ctx, ctx.obj)
        if not isinstance(result, Result):
            raise TypeError(f"{type(rec).__name__}.reconcile returned {type(result).__name__}, not a Result")
    except TemporaryError as exc:
        ctx.log.info("%s: temporary error (%s), retrying in %.1fs", ctx.request, exc.message, exc.delay)
        return _Decision("error", QueueAction.RETRY_AFTER, exc.delay, error_class="TemporaryError",
                         error_message=f"{exc.reason}: {exc.message}")
    except PermanentError as exc:
        text = f"{exc.reason}: {exc.message}"
        if deleting or rec.failed_phase not in rec.state_machine.states:  # cleanup cannot give up: retry
            return _Decision("error", QueueAction.BACKOFF, error_class="PermanentError", error_message=text)
        ctx.log.info("%s: permanent error %s", ctx.request, text)
        return _Decision("error", QueueAction.FORGET, change=PhaseChange(rec.failed_phase, exc.reason, exc.message),
                         error_class="PermanentError", error_message=text)
    except Exception as exc:
        ctx.log.warning("%s: reconcile raised %s: %s", ctx.request, type(exc).__name__, exc, exc_info=True)
        return _Decision("error", QueueAction.BACKOFF, error_class=type(exc).__name__, error_message=str(exc)[:2000])
    return _from_result(ctx, result, recorded, live, healing)


def _queue_for(result: Result) -> tuple[str, QueueAction, float | None]:
    """The label and queue action of a Result (RequeueAfter wins over Requeue, as in controller-runtime)."""
    if result.requeue_after is not None:
        return "requeue_after", QueueAction.REQUEUE_AFTER, result.requeue_after
    if result.requeue:
        return "requeue", QueueAction.BACKOFF, None
    return "success", QueueAction.FORGET, None


def _from_result(ctx: EngineContext, result: Result, recorded: str | None, live: str,
                 healing: HealingView | None = None) -> _Decision:
    machine = ctx.reconciler.state_machine
    target = result.phase or live or recorded or machine.initial
    if catch_up_needed(machine, recorded, live, target):
        status = ctx.obj.get("status") or {}
        ctx.log.info("%s: recording %s first (written by an earlier run that was not recorded)", ctx.request, live)
        return _Decision("requeue", QueueAction.REQUEUE_NOW,
                         change=PhaseChange(live, status.get("reason") or "", status.get("message") or ""))
    label, queue, delay = _queue_for(result)
    generation = int(ctx.obj["metadata"].get("generation") or 0)
    if healing is not None and healing.rollback_actor and healing.rollback_generation == generation:
        return _rolling_back(ctx, result, recorded, target, healing, (label, queue, delay))
    through = _spec_change_phase(ctx, target, live)
    if through is not None:
        generation = ctx.obj["metadata"].get("generation")
        message = f"spec changed (generation {generation})" + (f": {result.message}" if result.message else "")
        if through != target:  # the concluded phase comes in the next run, once the change was through
            label, queue, delay = "requeue", QueueAction.REQUEUE_NOW, None
        return _Decision(label, queue, delay, change=PhaseChange(through, SPEC_CHANGED, message),
                         conditions=list(result.conditions), extra=dict(result.status))
    return _Decision(label, queue, delay, change=PhaseChange(target, result.reason, result.message),
                     conditions=list(result.conditions), extra=dict(result.status))


def _rolling_back(ctx: EngineContext, result: Result, recorded: str | None, target: str, healing: HealingView,
                  queued: tuple[str, QueueAction, float | None]) -> _Decision:
    """A run of the generation a rollback restored, while it is verified: into the kind's rollback phase first
    (run again at once), then in it until the reconcile concludes a ready phase or the failed one; the
    transitions carry the rollback as actor."""
    rec = ctx.reconciler
    label, queue, delay = queued
    actor = healing.rollback_actor
    through = rec.rollback_phase if rec.rollback_phase in rec.state_machine.states else None
    concluded = target in rec.ready_phases or target == rec.failed_phase
    if through is not None and recorded != through and not (recorded and recorded == target and concluded):
        message = healing.rollback_message or "rolling back"
        return _Decision("requeue", QueueAction.REQUEUE_NOW, change=PhaseChange(through, "RollingBack", message, actor),
                         conditions=list(result.conditions), extra=dict(result.status))
    phase = target if through is None or concluded else through
    return _Decision(label, queue, delay, change=PhaseChange(phase, result.reason, result.message, actor),
                     conditions=list(result.conditions), extra=dict(result.status))


def _spec_change_phase(ctx: EngineContext, target: str, live: str) -> str | None:
    """The kind's spec-change phase when this run goes into it because of a spec change: the generation moved,
    the object is not in that phase yet, and the reconcile did not conclude the failed phase."""
    rec = ctx.reconciler
    through = rec.spec_change_phase
    if through is None or not ctx.spec_changed or through not in rec.state_machine.states:
        return None
    if live == through or target == rec.failed_phase:
        return None
    return through


def _deletion(ctx: EngineContext, current: str) -> _Decision:
    rec = ctx.reconciler
    states = rec.state_machine.states
    terminating = rec.terminating_phase if rec.terminating_phase in states else None
    deleted = rec.deleted_phase if rec.deleted_phase in states else None
    fin = rec.finalizer
    has_finalizer = bool(fin) and fin in (ctx.obj["metadata"].get("finalizers") or [])
    if terminating and current not in (terminating, deleted):
        change = PhaseChange(terminating, DELETING, "deletion requested" + ("; cleaning up" if has_finalizer else ""))
        if has_finalizer:
            return _Decision("requeue", QueueAction.REQUEUE_NOW, change=change)
        return _Decision("success", QueueAction.FORGET, change=change)
    if not has_finalizer:
        return _Decision("success", QueueAction.FORGET)  # someone else's finalizers, or the garbage collector
    if deleted and current == deleted:  # cleanup was recorded; only the finalizer is left
        return _Decision("success", QueueAction.FORGET, remove_finalizer=True)
    result = rec.finalize(ctx, ctx.obj)
    if result is not None and (result.requeue or result.requeue_after is not None):
        label, queue, delay = _queue_for(result)
        change = PhaseChange(terminating, result.reason or "CleaningUp", result.message or "cleaning up") \
            if terminating else None
        return _Decision(label, queue, delay, change=change)
    change = PhaseChange(deleted, "Finalized", "cleanup finished; finalizer removed") if deleted else None
    return _Decision("success", QueueAction.FORGET, change=change, remove_finalizer=True)


def catch_up_needed(machine: StateMachine, recorded: str | None, live: str, target: str) -> bool:
    """True when the live status shows a phase the record does not have (a run wrote it and died before its
    record) and this run would move on from it: that phase must be recorded first."""
    return bool(recorded) and bool(live) and live not in (recorded, target) \
        and machine.allows(recorded, live) and machine.allows(live, target)


def unhandled_token(obj: dict[str, Any], annotations: tuple[str, ...] = REQUEST_ANNOTATIONS) -> str | None:
    """The manual-reconcile token the object asks for and its status has not handled yet, or None."""
    asked = unhandled_request(obj, annotations)
    return asked[1] if asked else None


def unhandled_request(obj: dict[str, Any], annotations: tuple[str, ...] = REQUEST_ANNOTATIONS
                      ) -> tuple[str, str] | None:
    """(annotation, token) of the newest manual-reconcile request on the object (`meta.request_annotation`)
    when its status has not handled it yet (`status.lastHandledReconcileAt`, for either spelling), or None."""
    asked = request_annotation(obj, annotations)
    if asked and asked[1] != (obj.get("status") or {}).get(LAST_HANDLED_RECONCILE_AT):
        return asked
    return None


def plan_transitions(machine: StateMachine, recorded: str | None, change: PhaseChange
                     ) -> tuple[list[PlannedTransition], bool]:
    """The transitions the record gets for `change` from the phase on record, and whether the machine refuses
    the change. A first phase other than the initial one enters the initial one first ("Initialized")."""
    phases, refused = machine.path(recorded, change.to_phase)
    out: list[PlannedTransition] = []
    source = recorded or ""
    for phase in phases:
        if phase == change.to_phase:
            out.append(PlannedTransition(source, phase, change.reason, change.message))
        else:
            out.append(PlannedTransition(source, phase, "Initialized",
                                         f"first recorded phase, on the way to {change.to_phase}"))
        source = phase
    return out, refused


def events_for(reconciler: Reconciler, transitions: Sequence[Any]) -> list[EventSpec]:
    """One Event per transition (anything with from_phase, to_phase, reason, message): Warning into the failed
    phase or a warning phase, Normal otherwise."""
    warning = {reconciler.failed_phase, *reconciler.warning_phases}
    out = []
    for row in transitions:
        text = f"{row.from_phase or '(new)'} -> {row.to_phase}"
        out.append(EventSpec("Warning" if row.to_phase in warning else "Normal",
                             condition_reason(row.reason or "", row.to_phase),
                             f"{text}: {row.message}" if row.message else text))
    return out


def refused_event(from_phase: str, to_phase: str, anomaly_id: int | None = None) -> EventSpec:
    """The Warning for a phase change the state machine refused (naming its anomaly once recorded)."""
    where = f" (anomaly {anomaly_id})" if anomaly_id is not None else ""
    return EventSpec("Warning", "IllegalTransition",
                     f"refused {from_phase or '(none)'} -> {to_phase}: the state machine does not allow it{where}")


# -- writing -----------------------------------------------------------------------------------------------


def build_status(
    reconciler: Reconciler,
    old: dict[str, Any],
    change: PhaseChange | None,
    conditions: Sequence[Condition],
    extra: dict[str, Any],
    generation: int,
    token: str | None,
    now: str | None = None,
    engine_conditions: Sequence[Condition] = (),
) -> dict[str, Any] | None:
    """The status to write over `old` for `change` (None: phase, reason, message and conditions left alone), or
    None when it would change nothing. An `extra` field set to None is removed. `engine_conditions` (healing's)
    are set whether or not the phase changes."""
    new = dict(old)
    if change is not None:
        for name, value in extra.items():
            if value is None:
                new.pop(name, None)
            else:
                new[name] = value
        new["phase"] = change.to_phase
        new["reason"] = change.reason
        new["message"] = change.message
        new["observedGeneration"] = generation
        new["conditions"] = kstatus_conditions(reconciler, old.get("conditions") or [], change.to_phase,
                                               change.reason, change.message, list(conditions), generation,
                                               now or now_rfc3339())
    if engine_conditions:
        new["conditions"] = merge_conditions(new.get("conditions") or [], engine_conditions, generation,
                                             now or now_rfc3339(), previous=old.get("conditions") or [])
    if token:
        new[LAST_HANDLED_RECONCILE_AT] = token
    return None if new == old else new


def merge_conditions(current: list[dict[str, Any]], wanted: Sequence[Condition], generation: int, now: str,
                     previous: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """`current` with each of `wanted` set by type (lastTransitionTime kept while the status stays, looked up
    in `previous` too: the status before a phase change rebuilt the list; a condition that changes nothing
    keeps its observedGeneration, so an unchanged status is not rewritten)."""
    out = [dict(c) for c in current if isinstance(c, dict)]
    index = {c.get("type"): i for i, c in enumerate(out)}
    earlier = {c.get("type"): c for c in previous or [] if isinstance(c, dict)}
    for cond in wanted:
        before = out[index[cond.type]] if cond.type in index else earlier.get(cond.type)
        if before is not None and cond.type not in index:
            index[cond.type] = len(out)
            out.append(dict(before))
        reason = condition_reason(cond.reason, cond.type)
        same = before is not None and (before.get("status"), before.get("reason"), before.get("message")) == (
            cond.status, reason, cond.message or "")
        if same:
            continue
        entry = {"type": cond.type, "status": cond.status, "reason": reason, "message": cond.message or "",
                 "observedGeneration": generation,
                 "lastTransitionTime": (before or {}).get("lastTransitionTime") if before is not None
                 and before.get("status") == cond.status else now}
        if before is not None:
            out[index[cond.type]] = entry
        else:
            index[cond.type] = len(out)
            out.append(entry)
    return out


def _write_status(ctx: EngineContext, decision: _Decision, generation: int, token: str | None,
                  engine_conditions: Sequence[Condition] = ()) -> tuple[int, tuple[str, str] | None]:
    """Write the decision's status with the resourceVersion read (409 → re-read, rebuild, retry); `ctx.obj`
    follows. Gone meanwhile (404) → nothing written. Returns how many 409s it met, and (resourceVersion, phase)
    of what the write returned (None when nothing was written)."""
    path = kube.object_path(ctx.kind, ctx.namespace or None, ctx.request.name, "status")
    conflicts = 0
    for _attempt in range(STATUS_ATTEMPTS):
        new = build_status(ctx.reconciler, ctx.obj.get("status") or {}, decision.change, decision.conditions,
                           decision.extra, generation, token, engine_conditions=engine_conditions)
        if new is None:
            return conflicts, None
        # managedFields left out: the server keeps them and records this write under our field manager
        meta = {k: v for k, v in (ctx.obj.get("metadata") or {}).items() if k != "managedFields"}
        try:
            ctx.obj = kube.request_json(ctx.api_client, "PUT", path, query={"fieldManager": FIELD_MANAGER},
                                        body={**ctx.obj, "metadata": meta, "status": new})
            returned = ctx.obj.get("metadata") or {}
            return conflicts, (str(returned.get("resourceVersion") or ""),
                               str((ctx.obj.get("status") or {}).get("phase") or ""))
        except kube.ApiException as exc:
            if exc.status == 409:
                conflicts += 1
                ctx.log.info("%s: status write conflict (409), re-reading", ctx.request)
                if ctx.refresh() is None:
                    return conflicts, None
                continue
            if exc.status == 404:
                return conflicts, None
            raise
    raise StatusConflict(f"status write of {ctx.request} met 409 Conflict {STATUS_ATTEMPTS} times")
