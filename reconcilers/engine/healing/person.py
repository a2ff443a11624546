"""Which anomalies need a person: those the engine will not handle by itself.

An active anomaly needs a person when:
- it is `rollback_failed` (`metrics.ROLLBACK_FAILED_RULE`): a rollback failed or could not be done;
- its rule does not roll back (`AnomalyRule.rollback` False), or the kind no longer declares it, or the anomaly
  itself says it may not roll anything back (`rollback_ok: false` in its entry, e.g. uncorroborated evidence);
- automatic rollback is off for the object (the mirror's copy of its `opsconsole.io/auto-rollback` annotation,
  else the kind's setting): nothing will act on the anomaly but a person.

Escalation (`escalation`: acknowledge, assign, resolve), the notifications (`notifications`) and the
`opsconsole_anomalies_unacknowledged_seconds` gauge all use this one definition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from reconcilers.core.healing import AnomalyRule
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics, registry
from reconcilers.engine.healing import healing_of


def person_needed(rule: str, rules: Sequence[AnomalyRule], auto_rollback: bool,
                  entry: Mapping[str, Any] | None = None) -> bool:
    """Whether an anomaly of `rule` needs a person (see the module docstring); `entry`, its active entry or its
    record's detail: one that says it may not roll back (`rollback_ok: false`) needs a person too."""
    if rule == metrics.ROLLBACK_FAILED_RULE or not auto_rollback:
        return True
    if entry is not None and entry.get("rollback_ok") is False:
        return True
    found = next((r for r in rules if r.name == rule), None)
    return found is None or not found.rollback


def reconciler_of(key: str) -> Reconciler | None:
    """The registered reconciler of a workqueue key, or None."""
    try:
        return registry.for_key(key)
    except (registry.UnknownKind, ValueError, KeyError):
        return None


def object_rules(resource: Any, reconciler: Reconciler | None = None) -> tuple[tuple[AnomalyRule, ...], bool]:
    """(the kind's rules, whether automatic rollback is on for the object) of a Resource row (no kind: (), off)."""
    reconciler = reconciler or reconciler_of(resource.key)
    if reconciler is None:
        return (), False
    healing = healing_of(reconciler)
    auto = healing.auto_rollback if resource.auto_rollback is None else bool(resource.auto_rollback)
    return tuple(healing.rules or ()), auto


def rules_needing_person(resource: Any, reconciler: Reconciler | None = None) -> list[str]:
    """The resource's active anomalies that need a person, sorted."""
    active = resource.active_anomalies or {}
    if not active:
        return []
    rules, auto = object_rules(resource, reconciler)
    return sorted(rule for rule, entry in active.items()
                  if person_needed(rule, rules, auto, entry if isinstance(entry, Mapping) else None))


def unacknowledged_seconds(reconciler: Reconciler, rules: Sequence[AnomalyRule], live: Any,
                           now: datetime | None = None) -> float:
    """The age of the oldest active anomaly among `live` (a Resource queryset of the kind) that needs a person
    and that nobody acknowledged (0: none)."""
    now = now or timezone.now()
    kind_auto = healing_of(reconciler).auto_rollback
    oldest = 0.0
    for active, auto in live.exclude(active_anomalies={}).values_list("active_anomalies", "auto_rollback"):
        for rule, entry in (active or {}).items():
            entry = entry or {}
            if entry.get("acknowledged") or not person_needed(rule, rules, kind_auto if auto is None else auto,
                                                              entry):
                continue
            try:
                since = datetime.fromisoformat(str(entry.get("since")))
            except ValueError:
                continue
            oldest = max(oldest, (now - since).total_seconds())
    return oldest
