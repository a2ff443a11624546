"""Self-healing as the console, the API and the commands ask for it, and what they show of it.

Actions (each one path for every caller; `actor` is `user:<name>`; each raises `HealingRefused` with the field at
fault and an HTTP status when it cannot be done, having written nothing):
- `resource_rollback`: restore the spec of an earlier generation (`reconcilers.engine.healing.rollback`);
- `resource_suspend` / `resource_resume`: suspend reconciles with a reason and an optional end, resume them;
- `resource_pin` / `resource_unpin`: the automatic rollback never restores a generation older than a pinned one.

Reads: `resource_healing` (the state, the rules, the last good generation), `resource_healing_records` (the
healing links of the resource's chain, newest first) and `healing_overview` (counts for the overview).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import apiclient, dispatch, registry
from reconcilers.engine.healing import healing_of
from reconcilers.engine.healing import rollback as rollback_engine
from reconcilers.engine.healing import suspend as suspend_engine
from reconcilers.engine.healing.metric_rules import not_evaluated_on_record
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.engine.healing.rollback import RollbackRefused
from reconcilers.engine.healing.state import FAILED, IN_PROGRESS, REFUSED
from reconcilers.models import HealingAction, HealingRecord, Resource, SpecRevision
from reconcilers.services.healing_evidence import anomalies_shown
from reconcilers.services.selectors.filters import namespace_q

#: the error every healing action raises when it cannot be done (`.field`, `.status`, `.message`)
HealingRefused = RollbackRefused

__all__ = [
    "HealingRefused",
    "HealingSummary",
    "healing_overview",
    "resource_healing",
    "resource_healing_records",
    "resource_pin",
    "resource_resume",
    "resource_rollback",
    "resource_suspend",
    "resource_unpin",
]


def _reconciler(resource: Resource) -> Reconciler:
    try:
        return registry.for_key(resource.key)
    except (registry.UnknownKind, ValueError) as exc:
        raise HealingRefused(f"the kind {resource.kind} is not registered here", field="resource") from exc


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise HealingRefused("a reason is required", field="reason", status=400)
    if len(reason) > 1000:
        raise HealingRefused("reason: at most 1000 characters", field="reason", status=400)
    return reason


def resource_rollback(resource: Resource, generation: int, *, actor: str, reason: str) -> HealingRecord:
    """Roll `resource` back to the spec recorded for `generation` (an earlier one) and enqueue it."""
    reconciler = _reconciler(resource)
    record = rollback_engine.rollback_apply(apiclient.get_api_client(resource.cluster), reconciler, resource.id,
                                            int(generation), actor=actor, reason=_reason(reason), auto=False)
    dispatch.enqueue_many([resource.key])
    return record


def resource_suspend(resource: Resource, *, actor: str, reason: str, until: datetime | None = None
                     ) -> HealingRecord:
    """Suspend `resource`'s reconciles (until `until`, when given)."""
    return suspend_engine.suspend_apply(apiclient.get_api_client(resource.cluster), _reconciler(resource),
                                        resource.id, actor=actor, reason=_reason(reason), until=until)


def resource_resume(resource: Resource, *, actor: str, reason: str) -> HealingRecord:
    """Resume `resource`'s reconciles (it is enqueued at once)."""
    return suspend_engine.resume_apply(apiclient.get_api_client(resource.cluster), _reconciler(resource),
                                       resource.id, actor=actor, reason=_reason(reason))


def resource_pin(resource: Resource, generation: int, *, actor: str, reason: str) -> HealingRecord:
    """Pin `generation`: automatic rollback never restores an older one."""
    reason = _reason(reason)
    generation = int(generation)
    with transaction.atomic():
        locked = Resource.objects.select_for_update().get(pk=resource.pk)
        if generation < 1 or generation > locked.generation:
            raise HealingRefused(f"generation must be between 1 and {locked.generation} (got {generation})",
                                 status=400)
        if not SpecRevision.objects.filter(resource_uid=locked.uid, generation=generation).exists():
            raise HealingRefused(f"no spec is on record for generation {generation}", status=400)
        record = healing_append(locked, HealingAction.PINNED, actor=actor, reason=reason, target_generation=generation,
                                message=f"generation {generation} pinned: automatic rollback never restores an "
                                        "older one", detail={"previous": locked.pinned_generation})
        locked.pinned_generation = generation
        locked.save(update_fields=fields_to_save("pinned_generation"))
    return record


def resource_unpin(resource: Resource, *, actor: str, reason: str) -> HealingRecord:
    """Remove the pin."""
    reason = _reason(reason)
    with transaction.atomic():
        locked = Resource.objects.select_for_update().get(pk=resource.pk)
        if locked.pinned_generation is None:
            raise HealingRefused("no generation is pinned", field="resource")
        record = healing_append(locked, HealingAction.UNPINNED, actor=actor, reason=reason,
                                target_generation=locked.pinned_generation,
                                message=f"generation {locked.pinned_generation} no longer pinned")
        locked.pinned_generation = None
        locked.save(update_fields=fields_to_save("pinned_generation"))
    return record


# -- reads ----------------------------------------------------------------------------------------------------


@dataclass
class HealingSummary:
    """What the detail page and the API show about one resource's healing."""

    #: [{rule, since, message, generation, rollback_ok, why_not, evidence}] (`healing_evidence.anomalies_shown`)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    suspended: bool = False
    suspension: dict[str, Any] | None = None
    rollback: dict[str, Any] | None = None
    pinned_generation: int | None = None
    auto_rollback: bool = False  # whether automatic rollback is on for this object
    auto_rollback_source: str = "kind"  # "annotation": the object's opsconsole.io/auto-rollback; "kind": its kind's
    rollback_after_seconds: float = 0.0
    verify_seconds: float = 0.0
    rules: list[dict[str, Any]] = field(default_factory=list)  # [{name, type, describe, rollback}]
    last_good_generation: int | None = None
    rollback_phase: str | None = None
    #: [{rule, since, reason, cause, record}]: rules whose latest evaluation could not be done (metric rules)
    not_evaluated: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rolling_back(self) -> bool:
        """A rollback's restored generation is being verified."""
        return (self.rollback or {}).get("state") == IN_PROGRESS

    @property
    def escalated(self) -> bool:
        """A rollback failed or could not be done: a person must decide."""
        return (self.rollback or {}).get("state") in (FAILED, REFUSED)


def resource_healing(resource: Resource) -> HealingSummary:
    """The resource's healing state and its kind's healing settings."""
    summary = HealingSummary(
        anomalies=anomalies_shown(resource),
        suspended=resource.suspended, suspension=resource.suspension, rollback=resource.rollback,
        pinned_generation=resource.pinned_generation, not_evaluated=not_evaluated_on_record(resource.id),
    )
    try:
        reconciler = registry.for_key(resource.key)
    except (registry.UnknownKind, ValueError):
        return summary
    healing = healing_of(reconciler)
    summary.auto_rollback = healing.auto_rollback if resource.auto_rollback is None else resource.auto_rollback
    summary.auto_rollback_source = "kind" if resource.auto_rollback is None else "annotation"
    summary.rollback_after_seconds = healing.rollback_after_seconds
    summary.verify_seconds = healing.verify_seconds
    summary.rules = [{"name": r.name, "type": r.type, "describe": r.describe(), "rollback": r.rollback}
                     for r in healing.rules or ()]
    summary.last_good_generation = rollback_engine.last_good_generation(resource.id, reconciler)
    summary.rollback_phase = reconciler.rollback_phase
    return summary


def resource_healing_records(resource: Resource, *, limit: int = 100) -> list[HealingRecord]:
    """The resource's healing records, newest first."""
    return list(HealingRecord.objects.filter(resource=resource).order_by("-seq")[:limit])


def healing_overview(namespaces: Iterable[str] | None = None, *, now: datetime | None = None) -> dict[str, Any]:
    """Counts for the overview: resources with an anomaly (by kind and rule), suspended, rolling back, escalated
    (`namespaces`: only those, None: all)."""
    rows = Resource.objects.filter(deleted=False).exclude(active_anomalies={}, suspended=False, rollback__isnull=True)
    if namespaces is not None:
        rows = rows.filter(namespace_q(namespaces))  # a Scope: by cluster too
    by_rule: Counter[tuple[str, str]] = Counter()
    anomalous = suspended = rolling_back = escalated = 0
    for kind, anomalies, is_suspended, rollback in rows.values_list("kind", "active_anomalies", "suspended",
                                                                    "rollback").iterator():
        if anomalies:
            anomalous += 1
            for rule in anomalies:
                by_rule[(kind, rule)] += 1
        suspended += bool(is_suspended)
        state = (rollback or {}).get("state")
        rolling_back += state == IN_PROGRESS
        escalated += state in (FAILED, REFUSED)
    return {"anomalous": anomalous, "suspended": suspended, "rolling_back": rolling_back, "escalated": escalated,
            "by_rule": [{"kind": k, "rule": r, "count": n} for (k, r), n in sorted(by_rule.items())],
            "at": (now or timezone.now()).isoformat()}
