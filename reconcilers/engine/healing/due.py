"""When the automatic path should act on a resource, and to which generation: `rollback_due`.

A spec change that went wrong is a generation that never reached a ready phase and that led to the failed phase,
to an anomaly of this generation that may roll back (`Resource.active_anomalies[rule]` with `generation` equal to
the resource's and `rollback_ok` true: corroborated, and the rule allows rollback), or to no ready phase within the
kind's `rollback_after_seconds`. The target is the newest earlier generation that reached a ready phase, never one
older than a pinned generation. A generation a rollback made, or one escalated already, is never acted on again.

`Due.detail` says what triggered it (the cause, the generation and, for an anomaly, the rule and the seq of its
`anomaly.detected` record): the rollback's `rollback.started` record carries it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Max

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine.healing import healing_of
from reconcilers.engine.healing.state import DEFERRED, IN_PROGRESS, WRITING
from reconcilers.models import Resource, SpecRevision, Transition


class Due(NamedTuple):
    """What the automatic path should do: `what` is "rollback" or "refuse"; `why` in words; `detail` the trigger."""

    what: str
    why: str
    detail: dict[str, Any]


def spec_digest(spec: dict[str, Any] | None) -> str:
    """A canonical digest of a spec (sorted keys, no whitespace): equal specs, equal digests."""
    text = json.dumps(spec or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def last_good_generation(resource_id: int, reconciler: Reconciler, *, below: int | None = None) -> int | None:
    """The newest generation (below `below`) that reached one of the kind's ready phases, or None."""
    rows = Transition.objects.filter(resource_id=resource_id, to_phase__in=reconciler.ready_phases)
    if below is not None:
        rows = rows.filter(generation__lt=below)
    return rows.aggregate(top=Max("generation"))["top"]


def generation_reached_ready(resource_id: int, reconciler: Reconciler, generation: int) -> bool:
    """Whether that generation of the resource reached a ready phase."""
    return Transition.objects.filter(resource_id=resource_id, generation=generation,
                                     to_phase__in=reconciler.ready_phases).exists()


def revision_spec(resource: Resource, generation: int) -> dict[str, Any] | None:
    """The spec recorded for one generation of the resource, or None."""
    return (SpecRevision.objects.filter(resource_uid=resource.uid, generation=generation)
            .values_list("spec", flat=True).first())


def rollback_due(resource: Resource, reconciler: Reconciler, now: datetime) -> Due | None:
    """Why the automatic path should act on this resource now (see the module docstring), or None. The caller
    checked that automatic rollback is on and the resource is not suspended."""
    healing = healing_of(reconciler)
    rollback = resource.rollback or {}
    if rollback.get("state") in (IN_PROGRESS, WRITING):
        return None
    if rollback.get("state") != DEFERRED and rollback.get("generation") == resource.generation:
        return None  # this generation is a rollback's, or was escalated already: never twice in a row
    if resource.phase in reconciler.ready_phases or resource.generation <= 1:
        return None
    if generation_reached_ready(resource.id, reconciler, resource.generation):
        return None  # it broke after it had worked: not a bad spec change
    trigger = _trigger(resource, reconciler, healing.rollback_after_seconds, now)
    if trigger is None:
        return None
    why, detail = trigger
    target = last_good_generation(resource.id, reconciler, below=resource.generation)
    if target is None:
        return Due("refuse", f"{why}; no earlier generation reached a ready phase", detail)
    if resource.pinned_generation is not None and target < resource.pinned_generation:
        return Due("refuse", f"{why}; the last good generation {target} is older than generation "
                             f"{resource.pinned_generation}, which is pinned", detail)
    return Due("rollback", why, {**detail, "target": target})


def rollback_anomalies(resource: Resource) -> list[tuple[str, dict[str, Any]]]:
    """The active anomalies that may trigger a rollback of the current generation: their evidence belongs to it
    (`generation`) and they may roll back (`rollback_ok`); a missing field counts as no."""
    out = []
    for rule, entry in sorted((resource.active_anomalies or {}).items()):
        if not isinstance(entry, dict) or entry.get("rollback_ok") is not True:
            continue
        generation = entry.get("generation")
        if isinstance(generation, int) and not isinstance(generation, bool) and generation == resource.generation:
            out.append((rule, entry))
    return out


def _trigger(resource: Resource, reconciler: Reconciler, after_seconds: float, now: datetime
             ) -> tuple[str, dict[str, Any]] | None:
    generation = resource.generation
    # the failed phase counts only as this generation's: the run that reconciled it said so (observedGeneration),
    # not a phase an older generation reached that the record still shows while the new one's first run is on its way
    if resource.phase == reconciler.failed_phase and (resource.observed_generation or 0) >= generation:
        return (f"generation {generation} led to {resource.phase} ({resource.reason})",
                {"cause": "failed_phase", "generation": generation, "phase": resource.phase,
                 "reason": resource.reason})
    matched = rollback_anomalies(resource)
    if matched:
        named = ", ".join(f"{rule} (evidence: healing record #{entry.get('record')})" for rule, entry in matched)
        return (f"generation {generation} led to the anomaly {named}",
                {"cause": "anomaly", "generation": generation,
                 "anomalies": [{"rule": rule, "record": entry.get("record")} for rule, entry in matched]})
    seen = (SpecRevision.objects.filter(resource_uid=resource.uid, generation=generation)
            .values_list("created_at", flat=True).first())
    if seen is not None and now - seen > timedelta(seconds=after_seconds):
        return (f"generation {generation} reached no ready phase within {after_seconds:g}s",
                {"cause": "no_ready_phase", "generation": generation, "seconds": after_seconds})
    return None
