"""Reconcile runs collapsed for reading: consecutive runs that say the same thing are one group.

`run_groups` is pure: it groups the page of runs already fetched (newest first, as the detail page lists them) with
the phase changes recorded around them, and reads nothing; `resource_run_groups` fetches one bounded page of runs
and the transitions that can fall between them (two indexed queries) and groups them.

The phase of a run. `ReconcileRun` has no phase column, so a run's phase is derived from the transitions:

* a transition recorded by a run (`Transition.run`) happened in that run: the run ends in its `to_phase`;
* a transition recorded by no run of the page (a user's action, a rollback, a run outside the page) happened
  at its `created_at`: the runs started at or after it are in its `to_phase`, those before it in its `from_phase`;
* a run with no transition at or before it in the page takes the `from_phase` of the first transition after it,
  and with none at all the resource's current phase.

Two consecutive runs (in time order) are one group when they have the same result, the same error class, the
same phase, no transition between them (the newer one recorded none and none happened in between), and neither
handled a manual reconcile request (a manual run is always a row of its own: someone asked for it). So a stuck
resource with one `requeue_after` run every 5 s is one group, and a phase change always starts a new one.

`trace_run` answers the trace page's "which run and resource is this trace?": the reconcile span names the key
(`opsconsole.key`), and the run is found through the (key, started_at) index near the span's start, so the read
stays bounded without an index on `ReconcileRun.trace_id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from reconcilers.models import ReconcileRun, Resource, Transition
from reconcilers.services.selectors.resources import resource_runs, resource_transitions


@dataclass
class RunGroup:
    """Consecutive runs that read the same: `runs` newest first."""

    result: str
    error_class: str
    phase: str
    runs: list[Any] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many runs the group holds."""
        return len(self.runs)

    @property
    def first_at(self) -> datetime:
        """When the oldest run of the group started."""
        return self.runs[-1].started_at

    @property
    def last_at(self) -> datetime:
        """When the newest run of the group started."""
        return self.runs[0].started_at

    @property
    def newest(self) -> Any:
        """The newest run of the group."""
        return self.runs[0]

    @property
    def total_seconds(self) -> float:
        """The runs' durations added up."""
        return sum(float(r.duration_seconds or 0) for r in self.runs)

    @property
    def anchor(self) -> int:
        """A stable id for the group across refreshes: its oldest run's id."""
        return self.runs[-1].pk


def _phases(ordered: Sequence[Any], transitions: Iterable[Any], current_phase: str) -> tuple[list[str], list[bool]]:
    """For runs in time order: each run's phase, and whether a transition falls between it and the run before."""
    ids = {r.pk for r in ordered}
    by_run: dict[int, Any] = {}
    loose: list[Any] = []
    for t in transitions:
        if t.run_id is not None and t.run_id in ids:
            if t.run_id not in by_run or t.seq > by_run[t.run_id].seq:
                by_run[t.run_id] = t  # the run's last phase change is where it ends
        else:
            loose.append(t)
    loose.sort(key=lambda t: (t.created_at, t.seq))
    # Each run's position on the timeline: the transitions placed before it (by time or by recording it).
    phases: list[str] = []
    breaks: list[bool] = []
    latest: Any = None
    j = 0
    for i, run in enumerate(ordered):
        moved = False
        while j < len(loose) and loose[j].created_at <= run.started_at:
            latest, moved, j = loose[j], True, j + 1
        own = by_run.get(run.pk)
        if own is not None and (latest is None or own.seq > latest.seq):
            latest, moved = own, True
        elif own is not None:
            moved = True
        breaks.append(moved and i > 0)
        phases.append(latest.to_phase if latest is not None else "")
    # Runs before the first known transition: the phase that transition left.
    later = sorted([*by_run.values(), *loose], key=lambda t: t.seq)
    first_from = later[0].from_phase if later else current_phase
    phases = [p or first_from for p in phases]
    return phases, breaks


def run_groups(runs: Sequence[Any], transitions: Iterable[Any] = (), *, current_phase: str = "") -> list[RunGroup]:
    """Group a page of runs (newest first) into `RunGroup`s (newest first) by the rule in the module docstring.
    `transitions`: the resource's transitions recorded by these runs or made while they ran (objects with `run_id`,
    `seq`, `created_at`, `from_phase`, `to_phase`); `current_phase`: the phase when no transition says."""
    ordered = sorted(runs, key=lambda r: (r.started_at, r.pk))
    phases, breaks = _phases(ordered, transitions, current_phase)
    groups: list[RunGroup] = []
    for run, phase, moved in zip(ordered, phases, breaks, strict=True):
        error_class = run.error_class or ""
        last = groups[-1] if groups else None
        if (last is not None and not moved and last.result == run.result and last.error_class == error_class
                and last.phase == phase and run.request_id is None and last.runs[0].request_id is None):
            last.runs.insert(0, run)
        else:
            groups.append(RunGroup(result=run.result, error_class=error_class, phase=phase, runs=[run]))
    groups.reverse()
    return groups


def resource_run_groups(resource: Resource, *, limit: int = 50) -> list[RunGroup]:
    """The resource's newest `limit` runs, grouped (`run_groups`); the transitions read are those recorded by these
    runs or made since the oldest of them started (at most 500)."""
    page = list(resource_runs(resource).order_by("-started_at", "-id")[:limit])
    if not page:
        return []
    oldest = min(r.started_at for r in page)
    transitions: list[Transition] = list(
        resource_transitions(resource)
        .filter(Q(run_id__in=[r.pk for r in page]) | Q(created_at__gte=oldest))
        .only("id", "run_id", "seq", "created_at", "from_phase", "to_phase")
        .order_by("-seq")[:500]
    )
    return run_groups(page, transitions, current_phase=resource.phase)


def trace_key(spans: Sequence[Any]) -> str:
    """The workqueue key a trace's spans name (`opsconsole.key` on the reconcile span, the earliest first); ''."""
    for span in sorted(spans, key=lambda s: (bool(s.parent_span_id), s.start_time)):
        attributes = span.attributes if isinstance(span.attributes, dict) else {}
        if isinstance(attributes.get("opsconsole.key"), str) and attributes["opsconsole.key"]:
            return attributes["opsconsole.key"]
    return ""


def trace_run(trace_id: str, spans: Sequence[Any]) -> tuple[ReconcileRun | None, Resource | None]:
    """The run recorded with this trace and its resource (either None when not found): the run of the key the
    spans name, started within a minute of the spans, with this trace id; the resource the run links to, else the
    newest mirror of the key."""
    key = trace_key(spans)
    if not key:
        return None, None
    start = min(s.start_time for s in spans)
    end = max(s.end_time for s in spans)
    run = (ReconcileRun.objects.filter(key=key, trace_id=trace_id.lower(), started_at__gte=start - timedelta(minutes=1),
                                       started_at__lte=end + timedelta(minutes=1))
           .select_related("resource").order_by("-started_at").first())
    resource = run.resource if run is not None and run.resource is not None else (
        Resource.objects.filter(key=key).order_by("-id").first())
    return run, resource


__all__ = ["RunGroup", "resource_run_groups", "run_groups", "trace_key", "trace_run"]
