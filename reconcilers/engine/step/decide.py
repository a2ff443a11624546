"""Deciding: what a reconcile concludes before its status write (`decide` → a `Decision`): the deletion's
phases and finalize(), the spec validated, reconcile() and its Result or error, the catch-up of a phase an earlier
run wrote and did not record, the spec-change phase, and a rollback being verified. No Django, Celery or Redis."""

from __future__ import annotations

from reconcilers.core.kind import validate_spec
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result, TemporaryError
from reconcilers.engine.context import EngineContext
from reconcilers.engine.step.outcome import Decision, HealingView, PhaseChange, QueueAction

SPEC_CHANGED = "SpecChanged"
#: the reason of the change into the terminating phase a deletion request starts (its actor is who deleted the
#: object, `provenance.outcome_noted`; the cleanup's transitions after it are the engine's)
DELETING = "Deleting"


def decide(ctx: EngineContext, recorded: str | None, foreign: bool = False,
           healing: HealingView | None = None) -> Decision:
    """What the reconcile of `ctx.obj` concludes from the phase on record (`foreign`: the live phase is out of band,
    so it is not built on); errors become decisions, never exceptions."""
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
        return Decision("error", QueueAction.RETRY_AFTER, exc.delay, error_class="TemporaryError",
                         error_message=f"{exc.reason}: {exc.message}")
    except PermanentError as exc:
        text = f"{exc.reason}: {exc.message}"
        if deleting or rec.failed_phase not in rec.state_machine.states:  # cleanup cannot give up: retry
            return Decision("error", QueueAction.BACKOFF, error_class="PermanentError", error_message=text)
        ctx.log.info("%s: permanent error %s", ctx.request, text)
        return Decision("error", QueueAction.FORGET, change=PhaseChange(rec.failed_phase, exc.reason, exc.message),
                         error_class="PermanentError", error_message=text)
    except Exception as exc:
        ctx.log.warning("%s: reconcile raised %s: %s", ctx.request, type(exc).__name__, exc, exc_info=True)
        return Decision("error", QueueAction.BACKOFF, error_class=type(exc).__name__, error_message=str(exc)[:2000])
    return _from_result(ctx, result, recorded, live, healing)


def _queue_for(result: Result) -> tuple[str, QueueAction, float | None]:
    """The label and queue action of a Result (RequeueAfter wins over Requeue, as in controller-runtime)."""
    if result.requeue_after is not None:
        return "requeue_after", QueueAction.REQUEUE_AFTER, result.requeue_after
    if result.requeue:
        return "requeue", QueueAction.BACKOFF, None
    return "success", QueueAction.FORGET, None


def _from_result(ctx: EngineContext, result: Result, recorded: str | None, live: str,
                 healing: HealingView | None = None) -> Decision:
    machine = ctx.reconciler.state_machine
    target = result.phase or live or recorded or machine.initial
    if catch_up_needed(machine, recorded, live, target):
        status = ctx.obj.get("status") or {}
        ctx.log.info("%s: recording %s first (written by an earlier run that was not recorded)", ctx.request, live)
        return Decision("requeue", QueueAction.REQUEUE_NOW,
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
        return Decision(label, queue, delay, change=PhaseChange(through, SPEC_CHANGED, message),
                         conditions=list(result.conditions), extra=dict(result.status))
    return Decision(label, queue, delay, change=PhaseChange(target, result.reason, result.message),
                     conditions=list(result.conditions), extra=dict(result.status))


def _rolling_back(ctx: EngineContext, result: Result, recorded: str | None, target: str, healing: HealingView,
                  queued: tuple[str, QueueAction, float | None]) -> Decision:
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
        return Decision("requeue", QueueAction.REQUEUE_NOW, change=PhaseChange(through, "RollingBack", message, actor),
                         conditions=list(result.conditions), extra=dict(result.status))
    phase = target if through is None or concluded else through
    return Decision(label, queue, delay, change=PhaseChange(phase, result.reason, result.message, actor),
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


def _deletion(ctx: EngineContext, current: str) -> Decision:
    rec = ctx.reconciler
    states = rec.state_machine.states
    terminating = rec.terminating_phase if rec.terminating_phase in states else None
    deleted = rec.deleted_phase if rec.deleted_phase in states else None
    fin = rec.finalizer
    has_finalizer = bool(fin) and fin in (ctx.obj["metadata"].get("finalizers") or [])
    if terminating and current not in (terminating, deleted):
        change = PhaseChange(terminating, DELETING, "deletion requested" + ("; cleaning up" if has_finalizer else ""))
        if has_finalizer:
            return Decision("requeue", QueueAction.REQUEUE_NOW, change=change)
        return Decision("success", QueueAction.FORGET, change=change)
    if not has_finalizer:
        return Decision("success", QueueAction.FORGET)  # someone else's finalizers, or the garbage collector
    if deleted and current == deleted:  # cleanup was recorded; only the finalizer is left
        return Decision("success", QueueAction.FORGET, remove_finalizer=True)
    result = rec.finalize(ctx, ctx.obj)
    if result is not None and (result.requeue or result.requeue_after is not None):
        label, queue, delay = _queue_for(result)
        change = PhaseChange(terminating, result.reason or "CleaningUp", result.message or "cleaning up") \
            if terminating else None
        return Decision(label, queue, delay, change=change)
    change = PhaseChange(deleted, "Finalized", "cleanup finished; finalizer removed") if deleted else None
    return Decision("success", QueueAction.FORGET, change=change, remove_finalizer=True)


def catch_up_needed(machine: StateMachine, recorded: str | None, live: str, target: str) -> bool:
    """True when the live status shows a phase the record does not have (a run wrote it and died before its
    record) and this run would move on from it: that phase must be recorded first."""
    return bool(recorded) and bool(live) and live not in (recorded, target) \
        and machine.allows(recorded, live) and machine.allows(live, target)
