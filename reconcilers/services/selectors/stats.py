"""Reads behind the console's overview: resources per kind and phase, how many transitions took each edge of
a kind's state machine over a window, the median time spent in a state before leaving it, the manual
requests of a resource, the stored spans of a trace, and the engine's liveness (the controller's leader Lease,
the Celery workers answering a ping), each limited to the caller's namespaces where it reads rows."""

from __future__ import annotations

import logging
import math
import statistics
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.meta import parse_rfc3339
from reconcilers.core.types import Request
from reconcilers.engine import apiclient, kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME
from reconcilers.models import ReconcileRequest, ReconcileRun, Resource, RunResult, Span, Transition
from reconcilers.services.selectors import aggregates
from reconcilers.services.selectors.filters import namespace_q
from reconcilers.services.selectors.scope import Scope, scope_allows

log = logging.getLogger(__name__)
_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()
_refreshing: set[str] = set()
_generation = 0  # bumped by stats_cache_clear: a refresh started before it does not store its value


def _cached(name: str, ttl: float, compute: Any, *, background: bool = False) -> Any:
    """A per-process memo of a slow read (a Lease, a worker ping, the overview's figures) for `ttl` seconds.
    With `background`, a stale value is answered at once while one thread reads the new one (for reads that
    leave the process and may wait on a timeout: no request waits for them but the first)."""
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(name)
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
        if hit is not None and background:
            if name not in _refreshing:
                _refreshing.add(name)
                threading.Thread(target=_refresh, args=(name, compute, _generation), daemon=True,
                                 name=f"stats-refresh-{name}").start()
            return hit[1]
        generation = _generation
    value = compute()
    with _cache_lock:
        if generation == _generation:
            _cache[name] = (time.monotonic(), value)
    return value


def _refresh(name: str, compute: Any, generation: int) -> None:
    try:
        value = compute()
    except Exception:  # the reads report their own errors; this only keeps the stale value
        log.exception("refreshing %s failed", name)
        value = None
    with _cache_lock:
        _refreshing.discard(name)
        if value is not None and generation == _generation:
            _cache[name] = (time.monotonic(), value)


def stats_cache_clear() -> None:
    """Forget the memoised reads (tests)."""
    global _generation
    with _cache_lock:
        _cache.clear()
        _refreshing.clear()
        _generation += 1


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
    return _cached(f"machines:{scope}:{sorted(states.items())!r}", ttl, compute)


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


class TraceNotVisible(LookupError):
    """The trace belongs to a namespace outside the caller's (or to none, and the caller is limited)."""


def _key_place(key: object) -> tuple[str, str] | None:
    if not isinstance(key, str):
        return None
    try:
        req = Request.from_key(key)
    except ValueError:
        return None
    return req.cluster, req.namespace


def trace_places(trace_id: str, spans: Iterable[Span]) -> set[tuple[str, str]]:
    """The (cluster, namespace) places a trace belongs to (namespace '' for cluster-scoped resources): a span
    belongs to its resource's, named by the reconcile span's `opsconsole.namespace` (with `opsconsole.cluster`,
    else the default cluster) / `opsconsole.key` attributes (and the keys its events name), and a trace that
    carried a manual reconcile request belongs to that request's resource's. Empty: the trace is about no
    resource (a page view, a controller's own work)."""
    found: set[tuple[str, str]] = set()
    for span in spans:
        attributes = span.attributes if isinstance(span.attributes, dict) else {}
        if isinstance(attributes.get("opsconsole.namespace"), str):
            cluster = attributes.get("opsconsole.cluster")
            found.add((cluster if isinstance(cluster, str) and cluster else DEFAULT_CLUSTER,
                       attributes["opsconsole.namespace"]))
        for attrs in [attributes, *(e.get("attributes") or {} for e in (span.events or []) if isinstance(e, dict))]:
            place = _key_place(attrs.get("opsconsole.key")) if isinstance(attrs, dict) else None
            if place is not None:
                found.add(place)
    for key in ReconcileRequest.objects.filter(trace_id=trace_id.lower()).values_list("key", flat=True)[:100]:
        place = _key_place(key)
        if place is not None:
            found.add(place)
    return found


def trace_namespaces(trace_id: str, spans: Iterable[Span]) -> set[str]:
    """The namespaces of the places a trace belongs to (`trace_places`)."""
    return {ns for _cluster, ns in trace_places(trace_id, spans)}


def trace_spans(trace_id: str, *, namespaces: frozenset[str] | None = None, limit: int = 2000) -> list[Span]:
    """The stored spans of one trace, in start order. For a caller limited to `namespaces` (a Scope: by cluster
    and namespace), TraceNotVisible unless every place the trace belongs to (`trace_places`) is theirs: a trace
    about no resource, or with no stored span, is visible only to callers with every namespace."""
    spans = list(Span.objects.filter(trace_id=trace_id.lower()).order_by("start_time", "id")[:limit])
    if namespaces is not None:
        belongs = trace_places(trace_id, spans)
        if not belongs or not all(scope_allows(namespaces, c, ns) for c, ns in belongs):
            raise TraceNotVisible(trace_id)
    return spans


def controller_leader(*, ttl: float = 5.0) -> dict[str, Any]:
    """The controller's leader Lease: {"holder", "renewed", "expires", "alive", "error"} (memoised `ttl` s,
    then refreshed in the background while the last value is answered)."""

    def read() -> dict[str, Any]:
        namespace = getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default")
        try:
            lease = kube.get_object(apiclient.get_api_client(), LEASE, namespace, LEASE_NAME, timeout=(1.0, 2.0))
        except Exception as exc:  # a read for display: report, never fail the page
            return {"holder": "", "renewed": None, "expires": None, "alive": False,
                    "error": f"the Kubernetes API did not answer: {type(exc).__name__}"}
        if lease is None:
            return {"holder": "", "renewed": None, "expires": None, "alive": False,
                    "error": "no controller has led yet"}
        spec = lease.get("spec") or {}
        renewed_raw = spec.get("renewTime") or spec.get("acquireTime")
        renewed = parse_rfc3339(renewed_raw)
        expires = renewed + timedelta(seconds=float(spec.get("leaseDurationSeconds") or 15)) if renewed else None
        alive = bool(spec.get("holderIdentity")) and expires is not None and expires > datetime.now(UTC)
        return {"holder": spec.get("holderIdentity") or "", "renewed": renewed, "expires": expires,
                "alive": alive, "error": ""}

    return _cached("leader", ttl, read, background=True)


def workers_alive(*, ttl: float = 10.0, timeout: float = 0.3) -> dict[str, Any]:
    """The Celery workers that answer a broadcast ping: {"workers": [names], "error"} (memoised `ttl` s, then
    refreshed in the background while the last value is answered: the ping waits its whole `timeout`)."""

    def read() -> dict[str, Any]:
        try:
            replies = current_app.control.ping(timeout=timeout) or []
        except Exception as exc:  # the broker did not answer
            return {"workers": [], "error": f"the broker did not answer: {type(exc).__name__}"}
        return {"workers": sorted(name for reply in replies for name in reply), "error": ""}

    return _cached("workers", ttl, read, background=True)


def recent_window(hours: float) -> datetime:
    """Now minus `hours`."""
    return timezone.now() - timedelta(hours=hours)


# -- the overview's charts (issue 18): the reconcile runs of a window per bucket, in one aggregate query --------


class _PercentileDisc(Aggregate):
    """PERCENTILE_DISC(fraction) WITHIN GROUP (ORDER BY expr): the nearest-rank quantile (a value of the set)."""

    function = "PERCENTILE_DISC"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def run_buckets(
    start: datetime,
    end: datetime,
    step: timedelta,
    *,
    quantiles: tuple[float, ...] = (0.5, 0.99),
    namespaces: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """The reconcile runs started in [start, end) in buckets of `step` from `start`: one dict per bucket, oldest
    first, {"start", "runs", "errors", "quantiles": {q: seconds or None}} (runs and errors 0, quantiles None
    for a bucket without runs); runs by their resource's namespace when limited to `namespaces`.

    One query: a range scan of the index on started_at, grouped by bucket number, counting runs and errors and
    taking each duration quantile (nearest rank, as `DatabaseMetricsSource` does) per bucket. SQLite (the
    embedded default) has neither EXTRACT nor PERCENTILE_DISC: there the same range scan reads the window's
    (started_at, duration, result) and the buckets are computed here."""
    seconds = step.total_seconds()
    if seconds <= 0 or end <= start:
        return []
    n = math.ceil((end - start).total_seconds() / seconds - 1e-9)
    if connection.vendor != "postgresql":
        return _run_buckets_read(start, end, step, n, quantiles, namespaces)
    bucket = Func(F("started_at"), Value(start, output_field=DateTimeField()), arg_joiner=" - ",
                  template=f"CAST(FLOOR(EXTRACT(EPOCH FROM (%(expressions)s)) / {float(seconds)!r}) AS integer)",
                  output_field=IntegerField())
    figures: dict[str, Any] = {"runs": Count("id"), "errors": Count("id", filter=Q(result=RunResult.ERROR))}
    for i, q in enumerate(quantiles):
        figures[f"q{i}"] = _PercentileDisc("duration_seconds", fraction=float(q))
    rows = (ReconcileRun.objects.filter(namespace_q(namespaces, column="resource__namespace"),
                                        started_at__gte=start, started_at__lt=end)
            .annotate(bucket=bucket).values("bucket").annotate(**figures).order_by())
    out = [{"start": start + step * i, "runs": 0, "errors": 0, "quantiles": dict.fromkeys(quantiles)}
           for i in range(n)]
    for row in rows:
        if 0 <= row["bucket"] < n:
            out[row["bucket"]].update(runs=row["runs"], errors=row["errors"],
                                      quantiles={q: row[f"q{i}"] for i, q in enumerate(quantiles)})
    return out


def _run_buckets_read(start: datetime, end: datetime, step: timedelta, n: int, quantiles: tuple[float, ...],
                      namespaces: frozenset[str] | None) -> list[dict[str, Any]]:
    """`run_buckets` without SQL percentiles: the window's runs read once, bucketed and ranked in Python."""
    seconds = step.total_seconds()
    durations: list[list[float]] = [[] for _ in range(n)]
    errors = [0] * n
    rows = (ReconcileRun.objects.filter(namespace_q(namespaces, column="resource__namespace"),
                                        started_at__gte=start, started_at__lt=end)
            .values_list("started_at", "duration_seconds", "result").iterator(chunk_size=5000))
    for started_at, duration, result in rows:
        i = int((started_at - start).total_seconds() // seconds)
        if 0 <= i < n:
            durations[i].append(float(duration or 0.0))
            errors[i] += result == RunResult.ERROR
    out = []
    for i in range(n):
        ranked = sorted(durations[i])
        figures = {q: (ranked[max(0, math.ceil(q * len(ranked)) - 1)] if ranked else None) for q in quantiles}
        out.append({"start": start + step * i, "runs": len(ranked), "errors": errors[i], "quantiles": figures})
    return out


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
