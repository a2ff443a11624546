"""What a kind declares about healing: its anomaly rules and whether (and how fast) it rolls back by itself.

Pure contracts (no Django): a kind sets `Reconciler.healing = Healing(...)`; the engine
(`reconcilers.engine.healing`) evaluates the rules over the record (the Events archive, the transitions, the
phase a resource is in and since when) and acts on them. Rules come from the kind, else from the settings'
defaults (`OPSCONSOLE_ANOMALY_RULES`), and `OPSCONSOLE_HEALING` overrides a kind's settings by kind name.

Three kinds of rule:
- `events`: at least `threshold` occurrences of Events whose type is in `types` and reason in `reasons`, about
  the object (`involved="self"`), its descendants (`"children"`) or either (`"any"`), within `window_seconds`;
- `flapping`: at least `threshold` transitions `from_phase` → `to_phase` within `window_seconds`;
- `stuck`: in `phase` for longer than `seconds`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

EVENTS, FLAPPING, STUCK = "events", "flapping", "stuck"
RULE_TYPES = (EVENTS, FLAPPING, STUCK)
INVOLVED = ("self", "children", "any")


class RuleError(ValueError):
    """A rule or healing setting that cannot be used: the message names the field."""


@dataclass(frozen=True)
class AnomalyRule:
    """One anomaly rule (see the module docstring). `rollback`: whether a match may trigger an automatic
    rollback of a spec change (where the kind or the object enables it)."""

    name: str
    type: str
    window_seconds: float = 300.0
    threshold: int = 3
    reasons: tuple[str, ...] = ()
    types: tuple[str, ...] = ("Warning",)
    involved: str = "any"
    from_phase: str = ""
    to_phase: str = ""
    phase: str = ""
    seconds: float = 0.0
    rollback: bool = True

    def __post_init__(self) -> None:
        if not self.name or len(self.name) > 63:
            raise RuleError("name: required, at most 63 characters")
        if self.type not in RULE_TYPES:
            raise RuleError(f"{self.name}.type: must be one of {', '.join(RULE_TYPES)} (got {self.type!r})")
        if self.type == EVENTS and not self.reasons:
            raise RuleError(f"{self.name}.reasons: an events rule needs at least one reason")
        if self.type == EVENTS and self.involved not in INVOLVED:
            raise RuleError(f"{self.name}.involved: must be one of {', '.join(INVOLVED)} (got {self.involved!r})")
        if self.type == FLAPPING and not (self.from_phase and self.to_phase):
            raise RuleError(f"{self.name}.from_phase/to_phase: a flapping rule needs both")
        if self.type == STUCK and (not self.phase or self.seconds <= 0):
            raise RuleError(f"{self.name}.phase/seconds: a stuck rule needs a phase and seconds > 0")
        if self.type != STUCK and (self.window_seconds <= 0 or self.threshold < 1):
            raise RuleError(f"{self.name}.window_seconds/threshold: must be > 0 and >= 1")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnomalyRule:
        """A rule from settings (a dict with the field names; lists for the tuples)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RuleError(f"{data.get('name', '?')}.{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")
        values = {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in data.items()}
        try:
            return cls(**values)
        except TypeError as exc:
            raise RuleError(f"{data.get('name', '?')}: {exc}") from exc

    def describe(self) -> str:
        """One line saying what the rule matches."""
        if self.type == EVENTS:
            about = {"self": "the object", "children": "its children", "any": "the object or its children"}
            kinds = "/".join(self.types) if self.types else "any"
            return (f">= {self.threshold} {kinds} events ({'/'.join(self.reasons)}) about {about[self.involved]} "
                    f"in {self.window_seconds:g}s")
        if self.type == FLAPPING:
            return f">= {self.threshold} x {self.from_phase} -> {self.to_phase} in {self.window_seconds:g}s"
        return f"{self.phase} for more than {self.seconds:g}s"


#: the defaults when neither the kind nor OPSCONSOLE_ANOMALY_RULES says otherwise
DEFAULT_RULES: tuple[AnomalyRule, ...] = (
    AnomalyRule("backoff", EVENTS, window_seconds=300, threshold=3, reasons=("BackOff", "Failed", "Unhealthy"),
                types=("Warning",), involved="children"),
    AnomalyRule("flapping", FLAPPING, window_seconds=600, threshold=4, from_phase="Running", to_phase="Degraded"),
    AnomalyRule("stuck", STUCK, phase="Pending", seconds=900, rollback=False),
)


@dataclass(frozen=True)
class Healing:
    """A kind's healing: its anomaly rules (None: the settings' defaults) and automatic rollback (off unless the
    kind, the settings or the object's `opsconsole.io/auto-rollback` annotation turns it on).

    With automatic rollback, a spec change that leads to the failed phase, to an anomaly (of a rule with
    `rollback`), or to no ready phase within `rollback_after_seconds` is rolled back to the last generation that
    reached a ready phase; the restored generation must reach one within `verify_seconds`, else the engine
    escalates."""

    rules: tuple[AnomalyRule, ...] | None = None
    auto_rollback: bool = False
    rollback_after_seconds: float = 300.0
    verify_seconds: float = 300.0

    def with_settings(self, overrides: Mapping[str, Any] | None, default_rules: Sequence[AnomalyRule]) -> Healing:
        """This healing with a kind's `OPSCONSOLE_HEALING` entry applied and the rules resolved."""
        healing = self
        if overrides:
            values = dict(overrides)
            unknown = sorted(set(values) - {"rules", "auto_rollback", "rollback_after_seconds", "verify_seconds"})
            if unknown:
                raise RuleError(f"OPSCONSOLE_HEALING.{unknown[0]}: unknown setting")
            if "rules" in values:
                values["rules"] = tuple(AnomalyRule.from_dict(r) if isinstance(r, Mapping) else r
                                        for r in values["rules"])
            healing = replace(healing, **values)
        if healing.rules is None:
            healing = replace(healing, rules=tuple(default_rules))
        return healing
