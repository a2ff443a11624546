"""The Kubernetes Events archive: the controller's writer of `KubeEvent` rows.

Events expire from Kubernetes (an hour by default); the controller watches core/v1 `events` and hands them to
`events_archive` in batches, as it does the Resource mirror. Each Event is filed under the registered object it is
about: the involved object itself when it is mirrored, else the object its *controller* ownerReferences lead up to
(Pod → ReplicaSet → Deployment → Memcached), found by `OwnerResolver`, which GETs each object it does not know yet
and remembers every answer (negative ones too) in a bounded LRU cache with a TTL, so that steady state costs no API
call per Event (`owners`). Events about objects that lead to no registered object are dropped, and so are those
whose involvedObject names another namespace than the one the object with that uid was found in.

Each row is attributed to the generation of the registered object it is evidence about (`generation`, None when
unattributed, and `attribution`: how, or why not), by `attribution`: the object's observed generation for an Event
about itself, and for an Event about a Pod or ReplicaSet only while its workload revision (its ReplicaSet's pod
template, a StatefulSet Pod's controller revision) is the one the workload makes now.

Each row carries the cluster of the object it is filed under (issue 41: `cluster`).

Cost per batch, whatever its size: one query for the mirrored uids, one for the counts archived before, one for
the clusters of objects the batch is the first to be filed under (remembered by the resolver), one INSERT
(`sqljson.insert_rows`, `bulk_create(ignore_conflicts=True)` in one JSON parameter on PostgreSQL: the unique
(event_uid, count) makes a repeated observation a no-op).

One row per observation (an Event's uid and its `count`). Its `occurrences` (the anomaly rules sum them) and its
times are bounded by what the controller observed, not by what the Event claims (`event_bounds`): at most the
number of states of the Event the watch delivered above the highest count archived before for that uid (a count
jump of thousands in one update is one occurrence), and no time later than when the controller archived it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine.healing.attribution import Attribution, attribute
from reconcilers.engine.healing.event_bounds import observed_occurrences, observed_times
from reconcilers.engine.healing.lineage import ObjectRef
from reconcilers.engine.healing.owner_reads import LIST_AT, LIST_PAGE_MIN
from reconcilers.engine.healing.owners import MAX_DEPTH, OwnerResolver
from reconcilers.engine.sqljson import insert_rows, pairs_by_key
from reconcilers.models import KubeEvent

__all__ = ["LIST_AT", "LIST_PAGE_MIN", "MAX_DEPTH", "EventPair", "ObjectRef", "OwnerResolver", "event_count",
           "event_times", "events_archive", "involved_ref", "written_where_it_is_about"]

log = logging.getLogger(__name__)

EventPair = tuple[dict[str, Any], dict[str, Any] | None]  # (the Event as seen, its previous state or None)


def involved_ref(event: dict[str, Any]) -> ObjectRef | None:
    """The Event's involvedObject (core/v1) or regarding (events.k8s.io/v1), None without a uid."""
    ref = event.get("involvedObject") or event.get("regarding") or {}
    uid = str(ref.get("uid") or "")
    if not uid:
        return None
    return ObjectRef(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("namespace") or ""),
                     str(ref.get("name") or ""), uid)


def written_where_it_is_about(event: dict[str, Any], ref: ObjectRef) -> bool:
    """Whether the Event is in its involved object's namespace (or, about a cluster-scoped object, in `default`,
    `kube-system` or none). kube-apiserver refuses anything else for an Event without `eventTime` but accepts it
    with one, so that whoever may create Events in one namespace could otherwise file them under another
    namespace's objects: the archive keeps only what kube-apiserver's legacy rule allows (issue 37)."""
    namespace = str((event.get("metadata") or {}).get("namespace") or "")
    if ref.namespace:
        return namespace == ref.namespace
    return namespace in ("", "default", "kube-system")


# -- the writer ----------------------------------------------------------------------------------------------


def _when(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def event_count(event: dict[str, Any]) -> int:
    """The Event's count (core/v1 `count`, or events.k8s.io `series.count`), at least 1."""
    series = event.get("series") or {}
    try:
        return max(1, int(event.get("count") or series.get("count") or 1))
    except (TypeError, ValueError):
        return 1


def event_times(event: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """(first, last) time of an Event: lastTimestamp, series.lastObservedTime, eventTime, creation, in that order."""
    meta = event.get("metadata") or {}
    series = event.get("series") or {}
    created = meta.get("creationTimestamp")
    last = (_when(event.get("lastTimestamp")) or _when(series.get("lastObservedTime")) or _when(event.get("eventTime"))
            or _when(created))
    first = _when(event.get("firstTimestamp")) or _when(event.get("eventTime")) or _when(created) or last
    return first, last


def _cut(value: Any, length: int) -> str:
    return str(value or "")[:length]


def _row(event: dict[str, Any], ref: ObjectRef, resource_id: int, count: int, occurrences: int,
         now: datetime, attribution: Attribution, cluster: str) -> KubeEvent:
    meta = event.get("metadata") or {}
    first, last = observed_times(*event_times(event), now)
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component") or ""
    return KubeEvent(
        resource_id=resource_id, cluster=cluster, event_uid=_cut(meta.get("uid"), 64), count=count,
        occurrences=occurrences,
        namespace=_cut(meta.get("namespace"), 63), name=_cut(meta.get("name"), 253), type=_cut(event.get("type"), 16),
        reason=_cut(event.get("reason"), 128), message=str(event.get("message") or ""),
        involved_api_version=_cut(ref.api_version, 253), involved_kind=_cut(ref.kind, 63),
        involved_namespace=_cut(ref.namespace, 63), involved_name=_cut(ref.name, 253),
        involved_uid=_cut(ref.uid, 64), source=_cut(source, 253), first_timestamp=first, last_timestamp=last,
        observed_at=now, generation=attribution[0], attribution=attribution[1][:32],
    )


def events_archive(batch: Sequence[EventPair], resolver: OwnerResolver) -> int:
    """Archive a batch of (Event, previous state or None): resolve where each is filed, drop those filed nowhere,
    those written in another namespace than their involved object's (`written_where_it_is_about`) and those whose
    count is already archived, and insert the rest in one statement, each bounded by what the watch observed
    (`event_bounds`: occurrences per state seen, no future time). The number of rows offered to the INSERT (a
    concurrent writer's rows are skipped by the unique constraint). Raises database errors (the controller keeps
    the batch and tries again)."""
    latest: dict[str, tuple[dict[str, Any], ObjectRef]] = {}
    seen: dict[str, set[int]] = {}  # uid -> the counts the watch delivered (the batch's states and their previous)
    for event, old in batch:
        uid = str((event.get("metadata") or {}).get("uid") or "")
        ref = involved_ref(event)
        if uid and ref is not None and written_where_it_is_about(event, ref):
            seen.setdefault(uid, set()).add(event_count(event))
            if old is not None and str((old.get("metadata") or {}).get("uid") or "") == uid:
                seen[uid].add(event_count(old))
            previous = latest.get(uid)
            if previous is None or event_count(event) >= event_count(previous[0]):
                latest[uid] = (event, ref)
    if not latest:
        return 0
    filed = resolver.resolve(ref for _event, ref in latest.values())
    latest = {uid: pair for uid, pair in latest.items() if pair[1].uid in filed}
    if not latest:
        return 0
    refs = {ref.uid: ref for _event, ref in latest.values()}
    attributions = attribute({uid: filed[uid] for uid in refs}, refs,
                             {uid: resolver.lineage(uid) for uid in refs}, resolver.revisions)
    latest = {uid: pair for uid, pair in latest.items() if attributions[pair[1].uid] is not None}
    if not latest:
        return 0
    archived: dict[str, int] = pairs_by_key(KubeEvent, "event_uid", "count", latest, greatest=True)
    # each Event is archived in the cluster of the resource it is filed under
    cluster_of = resolver.clusters(filed[ref.uid] for _event, ref in latest.values())
    now = timezone.now()
    rows = []
    for uid, (event, ref) in latest.items():
        count = event_count(event)
        before = archived.get(uid, 0)
        if count <= before:
            continue  # this observation (or a later one) is archived already
        attribution = attributions[ref.uid]
        assert attribution is not None  # dropped above
        rows.append(_row(event, ref, filed[ref.uid], count, observed_occurrences(count, before, seen[uid]), now,
                         attribution, cluster_of.get(filed[ref.uid], DEFAULT_CLUSTER)))
    insert_rows(rows)
    return len(rows)
