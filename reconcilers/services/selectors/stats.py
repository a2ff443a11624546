"""Reads behind the console's overview and a resource's page: resources per kind and phase, how many transitions
took each edge of a kind's state machine over a window, the median time spent in a state before leaving it, how long
the live resources have been in their phase now, a resource's path through its machine and its manual requests,
each limited to the caller's namespaces where it reads rows. Beside it: the engine's liveness (`liveness`), a
trace's spans (`traces`), the runs chart (`run_charts`) and the memo of slow reads (`read_memo`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Min,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.utils import timezone

from reconcilers.models import ReconcileRequest, Resource, Transition
from reconcilers.services.selectors import aggregates
from reconcilers.services.selectors.filters import namespace_q
from reconcilers.services.selectors.read_memo import cached
from reconcilers.services.selectors.scope import Scope


def phase_counts(*, namespaces: frozenset[str] | None = None) -> dict[str, dict[str, int]]:
    """Live (not deleted) resources per Kind and phase ('' until the first transition), from the maintained
    counts (`aggregates`: no scan of the mirror)."""
    return aggregates.phase_counts(namespaces=namespaces)


def edge_counts(
    kind: str, since: datetime, *, namespaces: frozenset[str] | None = None
) -> dict[tuple[str, str], int]:
    """Transitions of `kind` recorded at or after `since`, per (from, to) edge."""
    return edge_window_counts({"n": since}, namespaces=namespaces).get(kind, {}).get("n", {})


def edge_window_counts(
    since: dict[str, datetime], *, namespaces: frozenset[str] | None = None
) -> dict[str, dict[str, dict[tuple[str, str], int]]]:
    """Transitions per Kind and (from, to) edge recorded at or after each of `since`'s times (e.g. {"hour": now
    - 1 h, "day": now - 1 d}): {kind: {window: {(from, to): n}}}; a kind with no transition in the widest window
    is absent, an edge with none in a window is absent from that window. The whole hours of each window come from
    the maintained per-hour counts and only the part of its first hour from the trail (`aggregates`), so the
    cost does not grow with the rate of transitions."""
    return aggregates.edge_window_counts(since, namespaces=namespaces)


def state_dwell_medians(
    kind: str,
    since: datetime,
    *,
    states: Iterable[str],
    namespaces: frozenset[str] | None = None,
    sample: int = 500,
) -> dict[str, float]:
    """The median seconds a `kind` resource spent in a state before leaving it, per state of `states`, over the
    newest `sample` departures from that state recorded since `since` (each paired with the transition of the
    same resource that entered the state, however old). A state left fewer than `sample` times in the window
    gets the exact median of all of them; a state not left in the window has no figure.

    One bounded query per state: an index on (kind, from_phase, created_at) finds the newest departures, and
    one on (resource, seq) their entering transitions, so the cost does not grow with the window's size."""
    entered = (Transition.objects.filter(resource_id=OuterRef("resource_id"), seq=OuterRef("seq") - 1)
               .values("created_at")[:1])
    dwell = ExpressionWrapper(F("created_at") - Subquery(entered, output_field=DateTimeField()),
                              output_field=DurationField())
    out: dict[str, float] = {}
    for state in dict.fromkeys(states):
        rows = (Transition.objects.filter(namespace_q(namespaces), kind=kind, from_phase=state,
                                          created_at__gte=since, seq__gt=1)
                .order_by("-created_at").annotate(dwell=dwell).values_list("dwell", flat=True)[:sample])
        spans = [max(0.0, d.total_seconds()) for d in rows if d is not None]
        if spans:
            out[state] = statistics.median(spans)
    return out


def machine_figures(
    machines: dict[str, Iterable[str]],
    *,
    namespaces: frozenset[str] | None = None,
    ttl: float | None = None,
) -> dict[str, dict[str, Any]]:
    """What the overview draws on each kind's state machine besides the resource counts: {kind: {"hour":
    {(from, to): n}, "day": {...}, "dwell": {state: median seconds}}} for `machines` ({kind: its states}):
    edges over the last hour and day (one query for every kind and both windows) and the dwell medians over
    the last day. Memoised per process and namespace set for `ttl` seconds (default the setting
    OPSCONSOLE_OVERVIEW_CACHE_SECONDS, 3 s; 0 turns it off): the live poller asks every few seconds."""
    if ttl is None:
        ttl = float(getattr(settings, "OPSCONSOLE_OVERVIEW_CACHE_SECONDS", 3.0))
    states = {kind: tuple(s) for kind, s in machines.items()}

    def compute() -> dict[str, dict[str, Any]]:
        now = timezone.now()
        day = now - timedelta(days=1)
        edges = edge_window_counts({"hour": now - timedelta(hours=1), "day": day}, namespaces=namespaces)
        out: dict[str, dict[str, Any]] = {}
        for kind, kind_states in states.items():
            windows = edges.get(kind, {})
            left = {from_phase for from_phase, _ in windows.get("day", {})}  # a state not left has no median
            out[kind] = {"hour": windows.get("hour", {}), "day": windows.get("day", {}),
                         "dwell": state_dwell_medians(kind, day, states=[s for s in kind_states if s in left],
                                                      namespaces=namespaces)}
        return out

    if ttl <= 0:
        return compute()
    scope = "*" if namespaces is None else namespaces.text() if isinstance(namespaces, Scope) else ",".join(
        sorted(namespaces))
    return cached(f"machines:{scope}:{sorted(states.items())!r}", ttl, compute)


def resource_path(resource: Resource) -> list[tuple[str, str]]:
    """The distinct edges this resource's recorded transitions took, oldest first."""
    seen: dict[tuple[str, str], None] = {}
    for edge in (Transition.objects.filter(resource=resource).order_by("seq")
                 .values_list("from_phase", "to_phase")):
        seen.setdefault(edge, None)
    return list(seen)


def resource_requests(resource: Resource, *, limit: int = 20) -> QuerySet[ReconcileRequest]:
    """The resource's manual reconcile requests, newest first."""
    return (ReconcileRequest.objects.filter(resource=resource).select_related("run")
            .order_by("-requested_at")[:limit])


def reconcile_request_visible(request_id: object, *, namespaces: frozenset[str] | None = None) -> ReconcileRequest:
    """One manual request by id if its resource is visible (ReconcileRequest.DoesNotExist otherwise)."""
    return (ReconcileRequest.objects.select_related("run", "resource")
            .filter(namespace_q(namespaces, column="resource__namespace")).get(pk=request_id))


def recent_window(hours: float) -> datetime:
    """Now minus `hours`."""
    return timezone.now() - timedelta(hours=hours)


# -- the state machine diagrams (issue 18): how long the live resources have been in their phase now ---------


class _MedianEpoch(Aggregate):
    """PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM expr)): the median of a timestamp column in
    seconds since the epoch (PostgreSQL)."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM %(expressions)s))"
    output_field = FloatField()


def phase_dwell_now(
    kind: str,
    *,
    namespaces: frozenset[str] | None = None,
    now: datetime | None = None,
    method: str | None = None,
) -> dict[str, dict[str, float]]:
    """How long the live (not deleted) resources of `kind` have been in the phase they are in now, per phase:
    {phase: {"n": resources, "median": seconds, "max": seconds}} from `Resource.phase_since` (resources without a
    phase yet are left out).

    `method` "counted" (the default): the resources per phase from the maintained counts (less those with no
    phase_since, which the recording never writes: an index lookup at the end of the phase's range), then per
    phase the oldest entry time and the middle one(s) by position in the index on (kind, phase, phase_since) of
    the live rows: short index reads per phase instead of a pass over every resource of the kind (issue 40).
    "percentile" (PostgreSQL): one aggregate query, count, oldest entry and
    PERCENTILE_CONT of the entry times per phase over the live rows; "offset": the count and oldest entry in one
    aggregate query and the middle by position. The median of the times spent is now minus the median entry
    time."""
    now = now or timezone.now()
    method = method or "counted"
    live = (Resource.objects.filter(namespace_q(namespaces), kind=kind, deleted=False, phase_since__isnull=False)
            .exclude(phase=""))
    if method == "counted":
        per_phase: dict[str, int] = {}
        for (counted_kind, _group, phase), n in aggregates.resource_counts(namespaces=namespaces,
                                                                            fold_first=False).items():
            if counted_kind == kind and phase and n > 0:
                per_phase[phase] = per_phase.get(phase, 0) + n
        unset = Resource.objects.filter(namespace_q(namespaces), kind=kind, deleted=False, phase_since__isnull=True)
        return {phase: figures for phase, n in sorted(per_phase.items())
                if (figures := _dwell_by_position(live.filter(phase=phase), n - unset.filter(phase=phase).count(),
                                                  now)) is not None}
    figures: dict[str, Any] = {"n": Count("id"), "oldest": Min("phase_since")}
    if method == "percentile":
        figures["mid"] = _MedianEpoch("phase_since")
    out: dict[str, dict[str, float]] = {}
    for row in live.values("phase").annotate(**figures).order_by():
        n = int(row["n"])
        if method == "percentile":
            median = now.timestamp() - float(row["mid"])
        else:
            middle = list(live.filter(phase=row["phase"]).order_by("phase_since")
                          .values_list("phase_since", flat=True)[(n - 1) // 2:n // 2 + 1])
            median = statistics.fmean((now - m).total_seconds() for m in middle)
        out[row["phase"]] = {"n": n, "median": max(0.0, median),
                             "max": max(0.0, (now - row["oldest"]).total_seconds())}
    return out


def _dwell_by_position(rows: QuerySet[Resource], n: int, now: datetime) -> dict[str, float] | None:
    """{"n", "median", "max"} of one phase's `rows` (n of them by the counts): the oldest entry and the middle
    one(s) read by position in entry order; counted again when the middle is not where `n` puts it (a row
    written since the counts were read). None when the phase has no row."""
    ordered = rows.order_by("phase_since").values_list("phase_since", flat=True)
    middle = list(ordered[(n - 1) // 2:n // 2 + 1])
    if len(middle) != 2 - n % 2:
        n = rows.count()
        if n == 0:
            return None
        middle = list(ordered[(n - 1) // 2:n // 2 + 1])
    oldest = ordered.first()
    median = statistics.fmean((now - m).total_seconds() for m in middle)
    return {"n": n, "median": max(0.0, median), "max": max(0.0, (now - oldest).total_seconds())}
