"""Operator versions compared on their runs' evidence: a canary (or a rolling upgrade of the workers) runs two
versions at once, and promoting one is a decision on these figures (issue 40).

`version_comparison` reads a window (default the last hour, up to now), optionally one kind, limited to the
viewer's namespaces (runs and anomalies by their resource's namespace: a run whose object was never mirrored is
left out for a limited viewer; transitions by their own) and, when asked, to some clusters (every row by its own
cluster: the console's cluster picker), and gives per `ReconcileRun.operator_version`:

* runs, error runs (result `error`) and the error rate (error runs / runs); p50 / p95 run duration (nearest rank
  over the runs read) and the objects touched (distinct resources, or keys for runs of an unmirrored object);
* failed transitions: transitions into a phase of the `failed` class of their kind (`Reconciler.phase_class`:
  `failed_phase` and what `phase_classes` marks failed; `Deleted` is terminal, not a failure) recorded in the
  window by a run of that version (`Transition.run`); a person's or a rollback's transition recorded by no run
  is not counted;
* anomalies: `Anomaly` rows created in the window on objects whose last run in the window was by that version
  (an anomaly on an object with no run in the window is not counted);
* time to ready: for objects whose first transition (seq 1) is in the window, the seconds from it to their
  first transition into one of their kind's `ready_phases`, grouped by the version of the run that recorded the
  ready transition (p50 / p95 and how many; an object not yet ready, or made ready by no run, is left out).

The work is bounded: the runs are read newest first by the `run_started` index, at most `cap` of them (100,000
by default; `capped` says when the window held more, and then the figures are those of the newest `cap` runs);
the failed transitions by the (kind, to_phase) index, the anomalies and first transitions by their creation time
index, each at most `cap`, and the ready transitions by the (resource, seq) index for those objects only.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from reconcilers.engine import registry
from reconcilers.models import Anomaly, ReconcileRun, RunResult, Transition
from reconcilers.services.selectors.filters import namespace_q

#: the window when none is given
DEFAULT_WINDOW = timedelta(hours=1)
#: the most runs (and transitions, anomalies) one comparison reads
MAX_RUNS = 100_000
#: resource ids per query when the ready transitions are read
_CHUNK = 1000


@dataclass
class VersionFigures:
    """One operator version's figures over the window (see the module for what each counts)."""

    version: str
    runs: int = 0
    error_runs: int = 0
    duration_p50: float | None = None
    duration_p95: float | None = None
    objects: int = 0
    failed_transitions: int = 0
    anomalies: int = 0
    ready_objects: int = 0
    time_to_ready_p50: float | None = None
    time_to_ready_p95: float | None = None
    highest_error_rate: bool = False

    @property
    def error_rate(self) -> float | None:
        """Error runs / runs; None without runs."""
        return self.error_runs / self.runs if self.runs else None

    @property
    def error_percent(self) -> float | None:
        """The error rate in percent; None without runs."""
        rate = self.error_rate
        return None if rate is None else rate * 100


@dataclass
class VersionComparison:
    """The versions that ran in [since, until), most runs first; `highest_error_rate` names the version whose
    error rate is strictly the highest when two or more versions ran (None otherwise)."""

    since: datetime
    until: datetime
    kind: str
    versions: list[VersionFigures] = field(default_factory=list)
    runs_read: int = 0
    capped: bool = False
    cap: int = MAX_RUNS
    highest_error_rate: str | None = None

    @property
    def compared(self) -> bool:
        """Whether two or more versions ran in the window."""
        return sum(1 for v in self.versions if v.runs) >= 2


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q` quantile of `values` (sorted here); None when there are none."""
    if not values:
        return None
    ranked = sorted(values)
    return float(ranked[min(len(ranked) - 1, max(0, math.ceil(q * len(ranked)) - 1))])


def _phases_of_class(wanted: str, kind: str) -> dict[str, frozenset[str]]:
    """{Kind: its phases of class `wanted`} for the registered kinds (one kind when `kind` is given)."""
    out: dict[str, frozenset[str]] = {}
    for rec in registry.registered():
        if kind and rec.resource.kind != kind:
            continue
        if wanted == "ready":
            phases = frozenset(rec.ready_phases)
        else:
            phases = frozenset(s for s in rec.state_machine.states if rec.phase_class(s) == wanted)
        if phases:
            out[rec.resource.kind] = out.get(rec.resource.kind, frozenset()) | phases
    return out


def _phase_q(phases: dict[str, frozenset[str]]) -> Q:
    q = Q(pk__in=[])
    for kind, names in phases.items():
        q |= Q(kind=kind, to_phase__in=sorted(names))
    return q


def _figures(by_version: dict[str, VersionFigures], version: str) -> VersionFigures:
    if version not in by_version:
        by_version[version] = VersionFigures(version)
    return by_version[version]


def _cluster_q(clusters: frozenset[str] | None) -> Q:
    """Rows of `clusters` by their own cluster column (None: every cluster)."""
    return Q() if clusters is None else Q(cluster__in=sorted(clusters))


def _read_runs(since: datetime, until: datetime, kind: str, namespaces: frozenset[str] | None, cap: int,
               by_version: dict[str, VersionFigures], clusters: frozenset[str] | None = None
               ) -> tuple[int, bool, dict[int, str]]:
    """The window's runs, newest first, at most `cap`: the run figures per version; the number read, whether
    capped, and each resource's last run's version."""
    qs = ReconcileRun.objects.filter(namespace_q(namespaces, column="resource__namespace"), _cluster_q(clusters),
                                     started_at__gte=since, started_at__lt=until)
    if kind:
        qs = qs.filter(kind=kind)
    rows = (qs.order_by("-started_at", "-id")
            .values_list("operator_version", "result", "duration_seconds", "resource_id", "key")[:cap + 1])
    durations: dict[str, list[float]] = defaultdict(list)
    touched: dict[str, set[object]] = defaultdict(set)
    last_by_resource: dict[int, str] = {}
    read = 0
    for version, result, duration, resource_id, key in rows.iterator(chunk_size=5000):
        if read == cap:
            return read, True, _finish_runs(by_version, durations, touched, last_by_resource)
        read += 1
        figures = _figures(by_version, version)
        figures.runs += 1
        figures.error_runs += result == RunResult.ERROR
        durations[version].append(float(duration or 0.0))
        touched[version].add(resource_id if resource_id is not None else key)
        if resource_id is not None:
            last_by_resource.setdefault(resource_id, version)  # newest first: the first seen is the last run
    return read, False, _finish_runs(by_version, durations, touched, last_by_resource)


def _finish_runs(by_version: dict[str, VersionFigures], durations: dict[str, list[float]],
                 touched: dict[str, set[object]], last_by_resource: dict[int, str]) -> dict[int, str]:
    for version, values in durations.items():
        figures = by_version[version]
        figures.duration_p50, figures.duration_p95 = nearest_rank(values, 0.5), nearest_rank(values, 0.95)
        figures.objects = len(touched[version])
    return last_by_resource


def _count_failed_transitions(since: datetime, until: datetime, kind: str, namespaces: frozenset[str] | None,
                              cap: int, by_version: dict[str, VersionFigures],
                              clusters: frozenset[str] | None = None) -> None:
    failed = _phases_of_class("failed", kind)
    if not failed:
        return
    rows = (Transition.objects.filter(_phase_q(failed), namespace_q(namespaces), _cluster_q(clusters),
                                      run__isnull=False, created_at__gte=since, created_at__lt=until)
            .values_list("run__operator_version", flat=True)[:cap])
    for version in rows:
        _figures(by_version, version).failed_transitions += 1


def _count_anomalies(since: datetime, until: datetime, kind: str, namespaces: frozenset[str] | None, cap: int,
                     last_by_resource: dict[int, str], by_version: dict[str, VersionFigures],
                     clusters: frozenset[str] | None = None) -> None:
    qs = Anomaly.objects.filter(namespace_q(namespaces, column="resource__namespace"), _cluster_q(clusters),
                                created_at__gte=since, created_at__lt=until)
    if kind:
        qs = qs.filter(resource__kind=kind)
    for resource_id in qs.values_list("resource_id", flat=True)[:cap]:
        version = last_by_resource.get(resource_id)
        if version is not None:
            by_version[version].anomalies += 1


def _chunks(items: list[int], size: int) -> Iterable[list[int]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _time_to_ready(since: datetime, until: datetime, kind: str, namespaces: frozenset[str] | None, cap: int,
                   by_version: dict[str, VersionFigures], clusters: frozenset[str] | None = None) -> None:
    ready = _phases_of_class("ready", kind)
    if not ready:
        return
    firsts = (Transition.objects.filter(namespace_q(namespaces), _cluster_q(clusters), seq=1, created_at__gte=since,
                                        created_at__lt=until, kind__in=sorted(ready))
              .values_list("resource_id", "created_at")[:cap])
    born = dict(firsts)
    samples: dict[str, list[float]] = defaultdict(list)
    for ids in _chunks(sorted(born), _CHUNK):
        seen: set[int] = set()
        rows = (Transition.objects.filter(_phase_q(ready), resource_id__in=ids, created_at__lt=until)
                .order_by("resource_id", "seq")
                .values_list("resource_id", "created_at", "run_id", "run__operator_version"))
        for resource_id, created_at, run_id, version in rows:
            if resource_id in seen:
                continue
            seen.add(resource_id)  # the first transition into a ready phase
            if run_id is not None:
                samples[version].append(max(0.0, (created_at - born[resource_id]).total_seconds()))
    for version, values in samples.items():
        figures = _figures(by_version, version)
        figures.ready_objects = len(values)
        figures.time_to_ready_p50, figures.time_to_ready_p95 = nearest_rank(values, 0.5), nearest_rank(values, 0.95)


def _highest(versions: list[VersionFigures]) -> str | None:
    ran = [v for v in versions if v.runs]
    if len(ran) < 2:
        return None
    rates = sorted(((v.error_rate or 0.0), v.version) for v in ran)
    if rates[-1][0] == rates[-2][0]:
        return None  # equal error rates: none stands out
    return rates[-1][1]


def version_comparison(
    *,
    since: datetime | None = None,
    kind: str = "",
    namespaces: frozenset[str] | None = None,
    now: datetime | None = None,
    cap: int = MAX_RUNS,
    clusters: frozenset[str] | None = None,
) -> VersionComparison:
    """Each operator version's figures over [since, now) (default the last hour), of `kind` (a Kind name; '' for
    all), over `namespaces` and `clusters` (None: all). See the module for what is counted and how the reads are
    bounded."""
    until = now or timezone.now()
    start = since or until - DEFAULT_WINDOW
    by_version: dict[str, VersionFigures] = {}
    read, capped, last_by_resource = _read_runs(start, until, kind, namespaces, cap, by_version, clusters)
    _count_failed_transitions(start, until, kind, namespaces, cap, by_version, clusters)
    _count_anomalies(start, until, kind, namespaces, cap, last_by_resource, by_version, clusters)
    _time_to_ready(start, until, kind, namespaces, cap, by_version, clusters)
    versions = sorted(by_version.values(), key=lambda v: (-v.runs, v.version))
    worst = _highest(versions)
    for v in versions:
        v.highest_error_rate = v.version == worst
    return VersionComparison(since=start, until=until, kind=kind, versions=versions, runs_read=read,
                             capped=capped, cap=cap, highest_error_rate=worst)


__all__ = ["DEFAULT_WINDOW", "MAX_RUNS", "VersionComparison", "VersionFigures", "nearest_rank", "version_comparison"]
