"""Time in phase as an SLO (issue 42): each kind's phase objectives (`reconcilers.core.objectives`), their
attainment and burn rate over 1 h, 6 h and 30 d, computed from the transitions on record.

One departure from a phase is one Transition with that `from_phase`; the time spent in the phase is its
`created_at` less its predecessor's (the same resource, `seq - 1`) — exactly what the engine observes into
`opsconsole_phase_seconds` when it records the transition (`recording_rows.transitions_observe`). Per objective
and window it is one aggregate read from two indexes: `transition_kind_from_created` (kind, from_phase,
created_at, with resource and seq) finds the departures, `transition_resource_seq` (resource, seq, with
created_at) their entries.

Attainment = good / total (None without departures); burn rate = (1 - attainment) / (1 - target): 1 spends the
error budget exactly over the window, 14.4 over 1 h spends 2 % of a 30-day budget (the multi-window alert rules
generated from the same objectives into deploy/prometheus/slo.yml, reconcilers.engine.slo_rules, use the same
numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, OuterRef, Q, Subquery
from django.utils import timezone

from reconcilers.core.objectives import WINDOWS, PhaseObjective, objectives_of
from reconcilers.engine import registry
from reconcilers.models import Transition
from reconcilers.services.selectors.filters import namespace_q


@dataclass(frozen=True)
class WindowAttainment:
    """One objective over one window: departures, those within the bound, attainment and burn rate."""

    window: str
    seconds: int
    total: int
    good: int
    attainment: float | None
    burn_rate: float | None


@dataclass(frozen=True)
class ObjectiveReport:
    """One kind's objective with its attainment per window."""

    kind: str
    objective: PhaseObjective
    windows: list[WindowAttainment]

    def as_dict(self) -> dict[str, Any]:
        o = self.objective
        return {"kind": self.kind, "name": o.slug, "title": o.title, "phase": o.phase,
                "within_seconds": o.within_seconds, "target": o.target,
                "windows": [w.__dict__ for w in self.windows]}


def departures(kind: str, phase: str, within_seconds: int, since: datetime, until: datetime, *,
               namespaces: frozenset[str] | None = None, clusters: frozenset[str] | None = None) -> tuple[int, int]:
    """(departures from `phase` of `kind` recorded in [since, until), those that left within `within_seconds` of
    entering it). A departure whose entry is not on record (retention) counts as good only if it could not have
    taken longer than the bound, which it cannot know: it is left out. `namespaces`: only those (a caller limited
    to them); `clusters`: only the transitions of those (None: of every cluster)."""
    entered = Transition.objects.filter(resource_id=OuterRef("resource_id"), seq=OuterRef("seq") - 1) \
        .values("created_at")[:1]
    rows = Transition.objects.filter(kind=kind, from_phase=phase, created_at__gte=since, created_at__lt=until)
    if namespaces is not None:
        rows = rows.filter(namespace_q(namespaces))  # a Scope: by cluster too
    if clusters is not None:
        rows = rows.filter(cluster__in=sorted(clusters))
    found = (rows.annotate(entered=Subquery(entered)).filter(entered__isnull=False)
             .aggregate(total=Count("id"),
                        good=Count("id", filter=Q(created_at__lte=F("entered") + timedelta(seconds=within_seconds)))))
    return int(found["total"] or 0), int(found["good"] or 0)


def attainment(kind: str, objective: PhaseObjective, *, now: datetime | None = None,
               windows: tuple[tuple[str, int], ...] = WINDOWS,
               namespaces: frozenset[str] | None = None, clusters: frozenset[str] | None = None) -> ObjectiveReport:
    """`objective` of `kind` over each window ending `now` (`namespaces`, `clusters`: over those only)."""
    now = now or timezone.now()
    out = []
    for name, seconds in windows:
        total, good = departures(kind, objective.phase, objective.within_seconds, now - timedelta(seconds=seconds),
                                 now + timedelta(microseconds=1), namespaces=namespaces, clusters=clusters)
        ratio = good / total if total else None
        burn = (1 - ratio) / (1 - objective.target) if ratio is not None else None
        out.append(WindowAttainment(name, seconds, total, good, ratio, burn))
    return ObjectiveReport(kind, objective, out)


def report(*, now: datetime | None = None, namespaces: frozenset[str] | None = None,
           clusters: frozenset[str] | None = None) -> list[ObjectiveReport]:
    """Every registered kind's objectives with their attainment (the console's SLO panel, the API); a caller
    limited to `namespaces` sees them over those only, and over the transitions of `clusters` (None: every one:
    the console's cluster picker)."""
    now = now or timezone.now()
    return [attainment(rec.resource.kind, objective, now=now, namespaces=namespaces, clusters=clusters)
            for rec in registry.registered() for objective in objectives_of(rec)]
