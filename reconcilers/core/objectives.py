"""A kind's service level objectives on the time its objects spend in a phase (issue 42).

`PhaseObjective("Pending", within_seconds=300, target=0.99)`: 99 % of the departures from Pending happen within
5 minutes of entering it. The indicator is the time in the phase, observed when a transition leaves it: the
histogram `opsconsole_phase_seconds{kind, phase}` counts the same events the record holds (each Transition's time
less its predecessor's), so the attainment the console computes from the record and the one Prometheus computes
from the histogram agree. `within_seconds` must therefore be one of the histogram's bucket bounds (`BOUNDS`).

A kind declares its objectives as `Reconciler.objectives`; one that declares none gets `default_objectives`: its
machine's initial phase left within 5 minutes, 99 % of the time ("creations reach a ready phase within 5 min"
where the initial phase leads to the ready one). Pure: no Django, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the bucket bounds of opsconsole_phase_seconds (reconcilers.engine.metrics.TIME_IN_PHASE_BUCKETS): an objective's
#: bound is one of them, so the histogram answers it exactly
BOUNDS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 604800)
#: the windows attainment and burn rate are shown over (name, seconds)
WINDOWS = (("1h", 3600), ("6h", 21600), ("30d", 2592000))


@dataclass(frozen=True)
class PhaseObjective:
    """`target` of the departures from `phase` happen within `within_seconds` of entering it."""

    phase: str
    within_seconds: int = 300
    target: float = 0.99
    name: str = ""

    def __post_init__(self) -> None:
        if not self.phase:
            raise ValueError("phase: an objective names the phase whose time it bounds")
        if self.within_seconds not in BOUNDS:
            raise ValueError(f"within_seconds: {self.within_seconds} is not a bucket bound of "
                             f"opsconsole_phase_seconds (one of {', '.join(map(str, BOUNDS))})")
        if not 0 < self.target < 1:
            raise ValueError(f"target: {self.target} is not a fraction between 0 and 1 (e.g. 0.99)")

    @property
    def title(self) -> str:
        """The objective in words."""
        within = (f"{self.within_seconds // 60} min" if self.within_seconds % 60 == 0 and self.within_seconds < 3600
                  else f"{self.within_seconds // 3600} h" if self.within_seconds % 3600 == 0
                  else f"{self.within_seconds} s")
        return f"{self.target * 100:g} % of {self.phase} phases are left within {within}"

    @property
    def slug(self) -> str:
        return self.name or f"{self.phase.lower()}-{self.within_seconds}s"


def default_objectives(initial: str) -> tuple[PhaseObjective, ...]:
    """The objectives of a kind that declares none: its initial phase left within 5 minutes, 99 % of the time."""
    return (PhaseObjective(initial, 300, 0.99, name="creation"),) if initial else ()


def objectives_of(reconciler: Any) -> tuple[PhaseObjective, ...]:
    """`reconciler.objectives`, or `default_objectives` of its machine's initial phase."""
    declared = tuple(getattr(reconciler, "objectives", ()) or ())
    if declared:
        return declared
    machine = getattr(reconciler, "state_machine", None)
    return default_objectives(str(getattr(machine, "initial", "") or ""))
