"""Reads of the global transition feed: filters (kind, namespace, actor, from/to phase, time range, cluster), the
`since` cursor (rows after a transition id, oldest first: a script resumes where it stopped) and the
bounded export iterator used for CSV and JSON lines."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from reconcilers.models import Transition
from reconcilers.services.selectors.cluster_filters import cluster_filter_q
from reconcilers.services.selectors.filters import InvalidFilter, namespace_q, nul_free
from reconcilers.services.selectors.resources import kind_names

EXPORT_FIELDS: tuple[str, ...] = (
    "id", "created_at", "cluster", "kind", "namespace", "name", "resource_uid", "seq", "from_phase", "to_phase",
    "reason", "message", "generation", "resource_version", "actor", "run_id", "trace_id", "prev_hash", "hash",
)


@dataclass(frozen=True)
class TransitionFilters:
    """What the feed may be filtered by (every field optional)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    actor: str = ""
    from_phase: str = ""
    to_phase: str = ""
    after: datetime | None = None  # created_at >= after
    before: datetime | None = None  # created_at < before
    since: int | None = None  # id > since
    cluster: str = ""  # one cluster (`cluster_filters`)
    cluster_label: str = ""  # the clusters whose labels match this selector (`env=prod`)


def transition_list(
    filters: TransitionFilters | None = None, *, namespaces: frozenset[str] | None = None
) -> QuerySet[Transition]:
    """Transitions matching `filters`, limited to `namespaces`; not ordered (the caller orders by id)."""
    f = filters or TransitionFilters()
    nul_free(**{k: v for k, v in asdict(f).items() if isinstance(v, str)})
    qs = Transition.objects.filter(namespace_q(namespaces), cluster_filter_q(f.cluster, f.cluster_label))
    if f.kind:
        qs = qs.filter(kind=kind_names(f.kind)[0])
    if f.namespace:
        qs = qs.filter(namespace=f.namespace)
    if f.name:
        qs = qs.filter(name=f.name)
    if f.actor:
        qs = qs.filter(actor=f.actor)
    if f.from_phase:
        qs = qs.filter(from_phase=f.from_phase)
    if f.to_phase:
        qs = qs.filter(to_phase=f.to_phase)
    if f.after is not None and f.before is not None and f.after >= f.before:
        raise InvalidFilter("before", "must be later than 'after'")
    if f.after is not None:
        qs = qs.filter(created_at__gte=f.after)
    if f.before is not None:
        qs = qs.filter(created_at__lt=f.before)
    if f.since is not None:
        qs = qs.filter(id__gt=f.since)
    return qs


def transition_export_rows(qs: QuerySet[Transition], *, limit: int, chunk: int = 2000) -> Iterator[dict[str, Any]]:
    """At most `limit` rows of `qs` as plain dicts, oldest first, read in keyset chunks (constant memory,
    constant cost per chunk at any depth)."""
    last = 0
    sent = 0
    while sent < limit:
        rows = list(qs.filter(id__gt=last).order_by("id").values(*EXPORT_FIELDS)[: min(chunk, limit - sent)])
        if not rows:
            return
        yield from rows
        sent += len(rows)
        last = rows[-1]["id"]
