"""Reads of the maintained counts (`reconcilers.models.aggregates`): resources per kind and phase (and per cluster),
and transitions per edge over a window, at a cost that does not grow with the mirror or the audit trail.

The triggers append ±1 rows to the delta tables; `fold` moves them into the totals (one statement per table on
PostgreSQL, `DELETE ... RETURNING` feeding an upsert, under a transaction-level advisory lock so that two folds
never wait on each other's counter rows), and every read sums totals and the deltas not yet folded in one
statement (one snapshot), so a read equals a recount of the committed rows whether or not its fold ran.

`recount` computes the same figures from the rows themselves and, with `repair`, writes them as the totals: the
check after a bulk load that bypassed the triggers (the benchmarks' COPY in replica mode) or after tampering.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q
from django.db.models.functions import TruncHour

from reconcilers.models import (
    Resource,
    ResourceCount,
    ResourceCountDelta,
    Transition,
    TransitionCount,
    TransitionCountDelta,
)
from reconcilers.models.aggregates import BUCKET_SECONDS
from reconcilers.services.selectors.filters import namespace_q
from reconcilers.services.selectors.scope import Scope

#: pg_try_advisory_xact_lock's key for a fold (any constant no other code uses)
FOLD_LOCK = 0x6F63_636E  # "occn"
_RESOURCE_KEY = ("cluster", "kind", "group", "namespace", "phase", "deleted")
_TRANSITION_KEY = ("bucket", "cluster", "kind", "namespace", "from_phase", "to_phase")
_TABLES = (("reconcilers_resourcecount", _RESOURCE_KEY), ("reconcilers_transitioncount", _TRANSITION_KEY))


def _columns(key: tuple[str, ...]) -> str:
    return ", ".join(connection.ops.quote_name(c) for c in key)


def fold() -> bool:
    """Move the deltas into the totals. False when another fold was running (PostgreSQL; nothing is lost: the
    reads add the deltas left). Nothing to fold (an idle fleet): one read, no write transaction (SQLite's write
    lock is the whole database's)."""
    with connection.cursor() as c:
        c.execute("SELECT EXISTS (SELECT 1 FROM reconcilers_resourcecountdelta) "
                  "OR EXISTS (SELECT 1 FROM reconcilers_transitioncountdelta)")
        if not c.fetchone()[0]:
            return True
    with transaction.atomic(), connection.cursor() as c:
        if connection.vendor == "postgresql":
            c.execute("SELECT pg_try_advisory_xact_lock(%s)", [FOLD_LOCK])
            if not c.fetchone()[0]:
                return False
        for total, key in _TABLES:
            cols = _columns(key)
            if connection.vendor == "postgresql":
                c.execute(f"WITH moved AS (DELETE FROM {total}delta RETURNING {cols}, n) "  # noqa: S608 - constants
                          f"INSERT INTO {total} ({cols}, n) SELECT {cols}, SUM(n) FROM moved GROUP BY {cols} "
                          f"ORDER BY {cols} ON CONFLICT ({cols}) DO UPDATE SET n = {total}.n + EXCLUDED.n")
            else:  # SQLite: one writer at a time, and a transaction is serializable
                c.execute(f"INSERT INTO {total} ({cols}, n) SELECT {cols}, SUM(n) FROM {total}delta "  # noqa: S608
                          f"WHERE true GROUP BY {cols} ON CONFLICT ({cols}) DO UPDATE SET n = {total}.n + excluded.n")
                c.execute(f"DELETE FROM {total}delta")  # noqa: S608 - constants
    return True


def _summed(total: str, key: tuple[str, ...], wanted: tuple[str, ...], where: str, params: list[Any]
            ) -> list[tuple[Any, ...]]:
    """(wanted..., n) per distinct `wanted` over totals and deltas together, `where` applied to both; n != 0."""
    cols = _columns(wanted)
    sql = (f"SELECT {cols}, SUM(n) FROM (SELECT {cols}, n FROM {total} WHERE {where} "  # noqa: S608 - constants
           f"UNION ALL SELECT {cols}, n FROM {total}delta WHERE {where}) AS counted "
           f"GROUP BY {cols} HAVING SUM(n) <> 0")
    with connection.cursor() as c:
        c.execute(sql, params + params)
        return [tuple(row) for row in c.fetchall()]


def _at(value: datetime) -> Any:
    """A time as a raw query's parameter (SQLite compares the text Django stores: naive UTC)."""
    return connection.ops.adapt_datetimefield_value(value)


def _namespace_sql(namespaces: frozenset[str] | None, clusters: frozenset[str] | None = None
                   ) -> tuple[str, list[Any]]:
    """The WHERE of a read limited to `namespaces` (a Scope: by cluster and namespace) and to `clusters` (None:
    no limit; empty: nothing)."""
    if clusters is not None:
        if not clusters:
            return "1 = 0", []
        where, params = _namespace_sql(namespaces)
        return (f"{where} AND cluster IN ({', '.join(['%s'] * len(clusters))})", [*params, *sorted(clusters)])
    if namespaces is None:
        return "1 = 1", []
    if not namespaces:
        return "1 = 0", []
    if isinstance(namespaces, Scope):
        return namespaces.sql()
    return f"namespace IN ({', '.join(['%s'] * len(namespaces))})", sorted(namespaces)


def _cluster_q(clusters: frozenset[str] | None) -> Q:
    return Q() if clusters is None else Q(cluster__in=sorted(clusters))


def resource_counts(*, namespaces: frozenset[str] | None = None, deleted: bool | None = False,
                    fold_first: bool = True, clusters: frozenset[str] | None = None
                    ) -> dict[tuple[str, str, str], int]:
    """Resources per (kind, group, phase): live ones (`deleted` False), deleted ones (True) or all (None), in
    `namespaces` and `clusters` (None: every one)."""
    if fold_first:
        fold()
    where, params = _namespace_sql(namespaces, clusters)
    if deleted is not None:
        where += " AND deleted = %s"
        params = [*params, deleted]
    out: dict[tuple[str, str, str], int] = {}
    for kind, group, phase, n in _summed("reconcilers_resourcecount", _RESOURCE_KEY, ("kind", "group", "phase"),
                                         where, params):
        out[(kind, group, phase)] = int(n)
    return out


def phase_counts(*, namespaces: frozenset[str] | None = None, clusters: frozenset[str] | None = None
                 ) -> dict[str, dict[str, int]]:
    """Live (not deleted) resources per Kind and phase ('' until the first transition), as
    `stats.phase_counts` counted them from the mirror."""
    out: dict[str, dict[str, int]] = {}
    for (kind, _group, phase), n in resource_counts(namespaces=namespaces, clusters=clusters).items():
        per_kind = out.setdefault(kind, {})
        per_kind[phase] = per_kind.get(phase, 0) + n
    return out


def cluster_phase_counts(*, namespaces: frozenset[str] | None = None, clusters: frozenset[str] | None = None
                         ) -> dict[str, dict[str, int]]:
    """Live resources per cluster and phase (every kind together): one read of the maintained counts."""
    fold()
    where, params = _namespace_sql(namespaces, clusters)
    out: dict[str, dict[str, int]] = {}
    for cluster, phase, n in _summed("reconcilers_resourcecount", _RESOURCE_KEY, ("cluster", "phase"),
                                     where + " AND deleted = %s", [*params, False]):
        out.setdefault(cluster, {})[phase] = int(n)
    return out


def _bucket(at: datetime) -> datetime:
    seconds = int(at.timestamp()) // BUCKET_SECONDS * BUCKET_SECONDS
    return datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True)
class _Split:
    """A window [since, ∞) as a raw head [since, whole) read from the transitions and whole buckets from `whole`."""

    since: datetime
    whole: datetime


def _split(since: datetime) -> _Split:
    start = _bucket(since)
    return _Split(since, start if start == since else start + timedelta(seconds=BUCKET_SECONDS))


def edge_window_counts(
    since: dict[str, datetime], *, namespaces: frozenset[str] | None = None, fold_first: bool = True,
    clusters: frozenset[str] | None = None,
) -> dict[str, dict[str, dict[tuple[str, str], int]]]:
    """Transitions per Kind and (from, to) edge recorded at or after each of `since`'s times, as
    `stats.edge_window_counts` counts them from the trail: {kind: {window: {(from, to): n}}}.

    Each window is its whole hour buckets from the maintained counts plus the part of its first hour that the
    window holds, counted from the trail (an index range scan of less than an hour's transitions): one query for
    the buckets of every window, one per window for its head."""
    if not since:
        return {}
    if fold_first:
        fold()
    splits = {name: _split(at) for name, at in since.items()}
    out: dict[str, dict[str, dict[tuple[str, str], int]]] = {}

    def add(kind: str, name: str, edge: tuple[str, str], n: int) -> None:
        if n:
            per_window = out.setdefault(kind, {w: {} for w in since})[name]
            per_window[edge] = per_window.get(edge, 0) + n

    earliest = min(s.whole for s in splits.values())
    where, params = _namespace_sql(namespaces, clusters)
    rows = _summed("reconcilers_transitioncount", _TRANSITION_KEY, ("bucket", "kind", "from_phase", "to_phase"),
                   f"bucket >= %s AND {where}", [_at(earliest), *params])
    for bucket, kind, from_phase, to_phase, n in rows:
        bucket = _as_utc(bucket)
        for name, s in splits.items():
            if bucket >= s.whole:
                add(kind, name, (from_phase, to_phase), int(n))
    for name, s in splits.items():  # the part of each window's first hour: one index range scan of < 1 h each
        if s.whole > s.since:
            for row in (Transition.objects.filter(namespace_q(namespaces), _cluster_q(clusters),
                                                  created_at__gte=s.since, created_at__lt=s.whole)
                        .values("kind", "from_phase", "to_phase").annotate(n=Count("kind")).order_by()):
                add(row["kind"], name, (row["from_phase"], row["to_phase"]), row["n"])
    return out


def _as_utc(value: Any) -> datetime:
    """A bucket as SQLite's raw cursor returns it (text) or PostgreSQL's (an aware datetime)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def transitions_per_kind(start: datetime, end: datetime, *, namespaces: frozenset[str] | None = None
                         ) -> dict[str, int]:
    """Transitions per Kind recorded in [start, end): whole buckets from the counts, the two partial hours at the
    ends from the trail."""
    fold()
    first, last = _split(start).whole, _bucket(end)
    out: dict[str, int] = {}
    if first < last:
        where, params = _namespace_sql(namespaces)
        for kind, n in _summed("reconcilers_transitioncount", _TRANSITION_KEY, ("kind",),
                               f"bucket >= %s AND bucket < %s AND {where}", [_at(first), _at(last), *params]):
            out[kind] = out.get(kind, 0) + int(n)
        edges: Iterable[tuple[datetime, datetime]] = ((start, first), (last, end))
    else:
        edges = ((start, end),)
    for lo, hi in edges:
        if lo >= hi:
            continue
        for row in (Transition.objects.filter(namespace_q(namespaces), created_at__gte=lo, created_at__lt=hi)
                    .values("kind").annotate(n=Count("id")).order_by()):
            out[row["kind"]] = out.get(row["kind"], 0) + row["n"]
    return out


# -- the check: the counts recomputed from the rows --------------------------------------------------------------


def _recounted() -> tuple[dict[tuple[Any, ...], int], dict[tuple[Any, ...], int]]:
    resources = {tuple(row[k] for k in _RESOURCE_KEY): row["n"] for row in
                 Resource.objects.order_by().values(*_RESOURCE_KEY).annotate(n=Count("id"))}
    transitions = {tuple(row[k] for k in _TRANSITION_KEY): row["n"] for row in
                   Transition.objects.order_by().values("cluster", "kind", "namespace", "from_phase", "to_phase",
                                                        bucket=TruncHour("created_at", tzinfo=UTC))
                   .annotate(n=Count("id"))}
    return resources, transitions


def _maintained() -> tuple[dict[tuple[Any, ...], int], dict[tuple[Any, ...], int]]:
    all_rows, params = _namespace_sql(None)
    resources = {row[:-1]: int(row[-1]) for row in
                 _summed("reconcilers_resourcecount", _RESOURCE_KEY, _RESOURCE_KEY, all_rows, params)}
    transitions = {(_as_utc(row[0]), *row[1:-1]): int(row[-1]) for row in
                   _summed("reconcilers_transitioncount", _TRANSITION_KEY, _TRANSITION_KEY, all_rows, params)}
    resources = {(*k[:-1], bool(k[-1])): n for k, n in resources.items()}  # SQLite's 0/1
    return resources, transitions


def recount(*, repair: bool = False) -> dict[str, dict[tuple[Any, ...], tuple[int, int]]]:
    """The keys whose maintained count differs from a recount of the rows: {"resources" | "transitions": {key:
    (maintained, recounted)}}; empty dicts when they agree. With `repair`, the totals are replaced by the recount
    (and the deltas emptied) in one transaction, the mirror and the trail locked against writes meanwhile."""
    with transaction.atomic():
        if repair and connection.vendor == "postgresql":
            with connection.cursor() as c:  # writers wait; readers do not
                c.execute("LOCK TABLE reconcilers_resource, reconcilers_transition IN SHARE MODE")
        recounted = _recounted()
        maintained = _maintained()
        out: dict[str, dict[tuple[Any, ...], tuple[int, int]]] = {}
        for name, want, have in zip(("resources", "transitions"), recounted, maintained, strict=True):
            out[name] = {k: (have.get(k, 0), want.get(k, 0)) for k in set(want) | set(have)
                         if have.get(k, 0) != want.get(k, 0)}
        if repair and any(out.values()):
            _replace(*recounted)
    return out


def _replace(resources: dict[tuple[Any, ...], int], transitions: dict[tuple[Any, ...], int]) -> None:
    ResourceCountDelta.objects.all().delete()
    ResourceCount.objects.all().delete()
    ResourceCount.objects.bulk_create(ResourceCount(n=n, **dict(zip(_RESOURCE_KEY, k, strict=True)))
                                      for k, n in resources.items())
    TransitionCountDelta.objects.all().delete()
    TransitionCount.objects.all().delete()
    TransitionCount.objects.bulk_create((TransitionCount(n=n, **dict(zip(_TRANSITION_KEY, k, strict=True)))
                                         for k, n in transitions.items()), batch_size=2000)
