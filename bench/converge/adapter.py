"""The Context adapter the kopf operator hands `MemcachedReconciler`, and the status write around it, without Django.

The context is the engine's own `reconcilers.engine.context.EngineContext`: given a kubernetes ApiClient it
never reads Django settings, so `apply_child`, `list`, `event` and the conditions are exactly the code
opsconsole's runner uses. What the runner does around the reconcile lives in `reconcilers.engine.runner`,
which imports the Django models and cannot be imported without a configured Django; the few pure pieces
needed are the same code or mirror it: the kstatus conditions (Ready/Reconciling/Stalled with
lastTransitionTime kept) come from `reconcilers.engine.kstatus`, which the runner uses too; the status built
from a Result (phase, reason, message, observedGeneration, the reconciler's own fields) mirrors
`runner.build_status`, and so does the error handling (TemporaryError → retry
after its delay, PermanentError → Failed with its reason, anything else → per-key exponential backoff).
The status goes through `/status` with the resourceVersion read (409 → re-read, rebuild, retry) and an
Event is posted per phase change, as the runner does per recorded transition. What kopf does not get is
the database record (ReconcileRun, Transition, mirror), the Redis workqueue and the leases: that is the
difference the benchmark measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Condition, PermanentError, Result, TemporaryError
from reconcilers.engine import kube
from reconcilers.engine.context import EngineContext, now_rfc3339
from reconcilers.engine.kstatus import condition_reason, kstatus_conditions

STATUS_ATTEMPTS = 5
BACKOFF_BASE = 0.005
BACKOFF_CAP = 1000.0


@dataclass
class Outcome:
    """What one reconcile concluded: the phase written (if any) and when to look again."""

    result: str  # success / error / requeue_after, as controller-runtime labels them
    phase: str | None = None
    previous_phase: str = ""
    requeue_after: float | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def build_status(reconciler: Reconciler, old: dict[str, Any], phase: str, reason: str, message: str,
                 conditions: list[Condition], extra: dict[str, Any], generation: int) -> dict[str, Any] | None:
    """The status to write over `old`, or None when it would change nothing (mirrors the runner)."""
    new = dict(old)
    for name, value in extra.items():
        if value is None:
            new.pop(name, None)
        else:
            new[name] = value
    new.update(phase=phase, reason=reason, message=message, observedGeneration=generation)
    new["conditions"] = kstatus_conditions(reconciler, old.get("conditions") or [], phase, reason, message,
                                           conditions, generation, now_rfc3339())
    return None if new == old else new


def write_status(ctx: EngineContext, reconciler: Reconciler, phase: str, reason: str, message: str,
                 conditions: list[Condition], extra: dict[str, Any], generation: int) -> dict[str, Any]:
    """PUT the status through /status with the resourceVersion read; 409 → re-read, rebuild, retry."""
    kind = reconciler.resource
    path = kube.object_path(kind, ctx.namespace or None, ctx.request.name, "status")
    for _attempt in range(STATUS_ATTEMPTS):
        new = build_status(reconciler, ctx.obj.get("status") or {}, phase, reason, message, conditions, extra,
                           generation)
        if new is None:
            return ctx.obj
        try:
            ctx.obj = kube.request_json(ctx.api_client, "PUT", path, body={**ctx.obj, "status": new})
            return ctx.obj
        except kube.ApiException as exc:
            if exc.status == 409:
                if ctx.refresh() is None:
                    return ctx.obj
                continue
            if exc.status == 404:
                return ctx.obj
            raise
    raise RuntimeError(f"status write of {ctx.request.key()} met 409 Conflict {STATUS_ATTEMPTS} times")


def backoff(failures: int) -> float:
    """controller-runtime's per-key exponential backoff (5 ms · 2^n, capped at 1000 s)."""
    return min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(failures, 1023))


def reconcile_once(reconciler: Reconciler, api: Any, obj: dict[str, Any], failures: int = 0) -> Outcome:
    """One reconcile of `obj` as opsconsole's runner does it, minus the database and the workqueue."""
    ctx = EngineContext(reconciler, obj, api)
    status = obj.get("status") or {}
    previous = status.get("phase") or ""
    generation = int(obj["metadata"].get("generation") or 0)
    label = "success"
    requeue_after: float | None = None
    try:
        result = reconciler.reconcile(ctx, ctx.obj)
        if not isinstance(result, Result):
            raise TypeError(f"reconcile returned {type(result).__name__}, not a Result")
        phase = result.phase or previous or reconciler.state_machine.initial
        reason, message, conditions, extra = result.reason, result.message, list(result.conditions), result.status
        requeue_after = result.requeue_after
        if requeue_after is not None:
            label = "requeue_after"
    except TemporaryError as exc:
        return Outcome("error", previous_phase=previous, requeue_after=exc.delay, error=f"{exc.reason}: {exc.message}")
    except PermanentError as exc:
        phase, reason, message, conditions, extra = reconciler.failed_phase, exc.reason, exc.message, [], {}
        label = "error"
    except Exception as exc:  # noqa: BLE001 - retried with backoff, as the runner does
        return Outcome("error", previous_phase=previous, requeue_after=backoff(failures),
                       error=f"{type(exc).__name__}: {exc}")
    try:
        write_status(ctx, reconciler, phase, reason, message, conditions, dict(extra), generation)
    except Exception as exc:  # noqa: BLE001
        return Outcome("error", previous_phase=previous, requeue_after=backoff(failures),
                       error=f"status write: {type(exc).__name__}: {exc}")
    if phase != previous:
        warning = {reconciler.failed_phase, *getattr(reconciler, "warning_phases", ("Degraded",))}
        text = f"{previous or '(new)'} -> {phase}"
        ctx.event("Warning" if phase in warning else "Normal", condition_reason(reason or "", phase),
                  f"{text}: {message}" if message else text)
    return Outcome(label, phase=phase, previous_phase=previous, requeue_after=requeue_after)
