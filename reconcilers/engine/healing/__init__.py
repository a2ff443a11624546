"""Self-healing: anomaly rules over the record, rollback to the last good spec, suspend and resume.

- `records`: the healing links of a resource's hash chain (`HealingRecord`), appended with the row locked;
- `state`: what a run needs to know (`step.HealingView`) and the conditions healing puts on the object;
- `rollback`: rolling a resource back to a generation's spec (manual or automatic), its verification, escalation;
- `suspend`: suspend and resume (console, API, command, or the `opsconsole.io/suspended` annotation);
- `evaluator`: the controller's periodic step: rules matched and cleared, automatic rollbacks, expiries;
- `archive`: the Kubernetes Events archive the event rules read.

The kind declares what it wants (`reconcilers.core.healing.Healing`); `healing_of` resolves it with the settings.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from reconcilers.core.healing import DEFAULT_RULES, AnomalyRule, Healing
from reconcilers.core.meta import AUTO_ROLLBACK
from reconcilers.core.reconciler import Reconciler


def default_rules() -> tuple[AnomalyRule, ...]:
    """OPSCONSOLE_ANOMALY_RULES (a list of rule dicts), else the built-in defaults."""
    configured = getattr(settings, "OPSCONSOLE_ANOMALY_RULES", None)
    if configured is None:
        return DEFAULT_RULES
    return tuple(AnomalyRule.from_dict(rule) for rule in configured)


def healing_of(reconciler: Reconciler) -> Healing:
    """The kind's healing with OPSCONSOLE_HEALING[<Kind>] applied and its rules resolved."""
    overrides = (getattr(settings, "OPSCONSOLE_HEALING", None) or {}).get(reconciler.resource.kind)
    return reconciler.healing.with_settings(overrides, default_rules())


def auto_rollback_enabled(reconciler: Reconciler, annotations: dict[str, Any] | None) -> bool:
    """Whether automatic rollback is on for one object: its `opsconsole.io/auto-rollback` annotation ("true" or
    "false") when set, else the kind's (settings included)."""
    value = str((annotations or {}).get(AUTO_ROLLBACK, "")).strip().lower()
    if value in ("true", "false"):
        return value == "true"
    return healing_of(reconciler).auto_rollback
