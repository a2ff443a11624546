"""Writing the status a decision asks for: `build_status` (phase, reason, message, observedGeneration, kstatus
conditions, the reconciler's fields, healing's conditions, `lastHandledReconcileAt`) and `write_status` through
`/status` with the resourceVersion read (409 → re-read, rebuild, retry). No Django, Celery or Redis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconcilers.core.meta import FIELD_MANAGER, LAST_HANDLED_RECONCILE_AT, now_rfc3339
from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Condition
from reconcilers.engine import kube
from reconcilers.engine.context import EngineContext
from reconcilers.engine.kstatus import condition_reason, kstatus_conditions
from reconcilers.engine.step.outcome import Decision, PhaseChange

STATUS_ATTEMPTS = 5


class StatusConflict(Exception):
    """The status write kept meeting 409 Conflict (the object changes faster than we can write)."""


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


def write_status(ctx: EngineContext, decision: Decision, generation: int, token: str | None,
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
