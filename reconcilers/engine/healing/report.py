"""What one healing step did (`HealReport`), shared by the evaluator and the parts of its step."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconcilers.engine.healing.escalate import Escalation


@dataclass
class HealReport:
    """What one step did."""

    detected: int = 0
    cleared: int = 0
    rollbacks: int = 0
    escalations: list[Escalation] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)

    @property
    def did(self) -> bool:
        """Whether it changed anything."""
        return bool(self.detected or self.cleared or self.rollbacks or self.escalations or self.keys)
