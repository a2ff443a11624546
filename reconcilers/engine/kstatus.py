"""kstatus conditions: Ready / Reconciling / Stalled for a phase, in the metav1.Condition shape.

Pure functions over dicts (no Django, no Celery), used by the reconcile step (`reconcilers.engine.step`) when it
builds the status it writes. A condition's message is cut to metav1.Condition's 32768 characters and a reason
longer than its 1024 falls back to the phase: the API server refuses a status with either (422), which would
keep the phase from ever being written.
"""

from __future__ import annotations

import re
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Condition

_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
#: metav1.Condition's limits (the CRDs' condition schema carries them too)
REASON_MAX = 1024
MESSAGE_MAX = 32768


def condition_reason(reason: str, fallback: str) -> str:
    """`reason` when it is a valid metav1.Condition reason (CamelCase-ish, at most 1024), else `fallback`."""
    return reason if reason and len(reason) <= REASON_MAX and _REASON.match(reason) else fallback


def condition_message(message: str) -> str:
    """`message` cut to metav1.Condition's 32768 characters (ending in '…' when cut)."""
    return message if len(message) <= MESSAGE_MAX else message[: MESSAGE_MAX - 1] + "…"


def kstatus_conditions(
    reconciler: Reconciler,
    old: list[dict[str, Any]],
    phase: str,
    reason: str,
    message: str,
    extra: list[Condition],
    generation: int,
    now: str,
) -> list[dict[str, Any]]:
    """Ready / Reconciling / Stalled (kstatus) for `phase`, then the reconciler's own conditions;
    lastTransitionTime is kept for a condition whose status did not change."""
    ready_phases = reconciler.ready_phases
    machine = reconciler.state_machine
    ready = phase in ready_phases
    stalled = phase == reconciler.failed_phase
    reconciling = not ready and not stalled and not machine.is_terminal(phase)
    why = condition_reason(reason, phase)
    wanted = [
        Condition("Ready", "True" if ready else "False", why, message),
        Condition("Reconciling", "True", why, message) if reconciling else Condition("Reconciling", "False", phase),
        Condition("Stalled", "True", why, message) if stalled else Condition("Stalled", "False", phase),
    ]
    by_type = {c.type: c for c in wanted}
    for cond in extra:
        by_type[cond.type] = cond
    previous = {c.get("type"): c for c in old or [] if isinstance(c, dict)}
    out = []
    for cond in by_type.values():
        before = previous.get(cond.type)
        since = before.get("lastTransitionTime") if before and before.get("status") == cond.status else None
        out.append({
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": condition_message(cond.message or ""),
            "observedGeneration": generation,
            "lastTransitionTime": since or now,
        })
    return out
