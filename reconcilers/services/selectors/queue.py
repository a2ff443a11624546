"""Reads of the workqueue: pending, processing and backing-off keys with failure counts and next retry,
as wall-clock times, limited to the namespaces the caller may see and, when asked, to some clusters (a key's
cluster is its prefix, `reconcilers.core.clusters.key_split`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from reconcilers.core.clusters import key_split
from reconcilers.core.types import Request
from reconcilers.engine import dispatch
from reconcilers.services.selectors.filters import namespace_q
from reconcilers.services.selectors.scope import scope_allows


def _namespace_of(key: str) -> str | None:
    try:
        return Request.from_key(key).namespace
    except ValueError:
        return None


def key_visible(key: str, namespaces: frozenset[str] | None) -> bool:
    """Whether a caller limited to `namespaces` (None: not limited; a Scope: by cluster too) may see `key`."""
    if namespaces is None:
        return True
    try:
        req = Request.from_key(key)
    except ValueError:
        return False
    return scope_allows(namespaces, req.cluster, req.namespace)


def key_in_clusters(key: str, clusters: frozenset[str] | None) -> bool:
    """Whether `key` is of one of `clusters` (None: of every cluster; a key of no valid form is of none)."""
    if clusters is None:
        return True
    try:
        return key_split(key)[0] in clusters
    except ValueError:
        return False


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


#: how many items per list a limited caller's snapshot reads to count the keys it may see
VISIBLE_COUNT_LIMIT = 1_000_000


def queue_snapshot(*, namespaces: frozenset[str] | None = None, limit: int = 1000,
                   clusters: frozenset[str] | None = None) -> dict[str, Any]:
    """The queue's state now; the item lists hold only visible keys (of `clusters`, None: of every one), at most
    `limit` each. Counts (depth, processing, backing off) are the whole queue's for a caller with every namespace
    and every cluster, and otherwise the counts of the keys shown (the whole lists are read from Redis to count
    them)."""
    limited = namespaces is not None or clusters is not None
    snap = dispatch.get_queue().snapshot(limit=VISIBLE_COUNT_LIMIT if limited else limit)

    def visible(key: str) -> bool:
        return key_visible(key, namespaces) and key_in_clusters(key, clusters)

    pending = [p for p in snap.pending if visible(p.key)]
    processing = [p for p in snap.processing if visible(p.key)]
    backing_off = [d for d in snap.backing_off if visible(d.key)]
    return {
        "name": snap.name,
        "now": _when(snap.now),
        "depth": len(pending) if limited else snap.depth,
        "processing_count": len(processing) if limited else snap.processing_count,
        "delayed_count": len(backing_off) if limited else snap.delayed_count,
        "pending": [{"key": p.key, "queued_at": _when(p.queued_at), "waiting_seconds": max(0.0, snap.now - p.queued_at)}
                    for p in pending[:limit]],
        "processing": [{"key": p.key, "owner": p.owner, "since": _when(p.since),
                        "lease_expires": _when(p.lease_expires), "dirty": p.dirty}
                       for p in processing[:limit]],
        "backing_off": [{"key": d.key, "failures": d.failures, "next_retry": _when(d.next_retry),
                         "retry_in_seconds": max(0.0, d.next_retry - snap.now),
                         "retry_due_in_seconds": d.next_retry - snap.now}
                        for d in backing_off[:limit]],
    }


def resource_ids_by_key(keys: list[str] | set[str]) -> dict[str, int]:
    """The mirrored Resource id of each key that has one (a live row before a deleted one, then the newest):
    one query for a page's keys, so that keys can link to their resources."""
    from reconcilers.models import Resource

    wanted = {k for k in keys if k}
    ids: dict[str, int] = {}
    if not wanted:
        return ids
    for key, pk in (Resource.objects.filter(key__in=wanted).order_by("key", "deleted", "-id")
                    .values_list("key", "id")):
        ids.setdefault(key, pk)
    return ids


def due_wording(seconds_until: float) -> str:
    """A due time relative to now: 'in 5 s' ahead, 'due now' within a second, 'overdue by 3 s' behind."""
    if -1.0 <= seconds_until <= 1.0:
        return "due now"
    s = abs(seconds_until)
    text = f"{int(s)} s" if s < 60 else f"{int(s // 60)} min" if s < 3600 else f"{int(s // 3600)} h"
    return f"in {text}" if seconds_until > 0 else f"overdue by {text}"


def runs_last_hour(*, namespaces: frozenset[str] | None = None, minutes: int = 60,
                   clusters: frozenset[str] | None = None) -> dict[str, int]:
    """{"runs", "failed"} of the reconciles that started in the last `minutes` (of the caller's namespaces, and
    of `clusters`: None, every one): one aggregate query on the started_at index."""
    from django.db.models import Count, Q
    from django.utils import timezone

    from reconcilers.models import ReconcileRun

    runs = ReconcileRun.objects.filter(started_at__gte=timezone.now() - timedelta(minutes=minutes))
    if namespaces is not None:
        runs = runs.filter(namespace_q(namespaces, column="resource__namespace"))
    if clusters is not None:
        runs = runs.filter(cluster__in=sorted(clusters))
    return runs.aggregate(runs=Count("id"), failed=Count("id", filter=Q(result="error")))


def key_namespace(key: str) -> str | None:
    """The namespace a workqueue key names ('' for a cluster-scoped object; None for no valid key)."""
    return _namespace_of(key)


def queue_depth_history(*, minutes: int = 60, now: datetime | None = None) -> tuple[datetime, list[int | None]]:
    """The workqueue's depth over the last `minutes`, one value per minute (the largest sample in it; None where
    the controller recorded none), and the window's start. Whole-queue counts: callers show it only to users who
    see every namespace (the totals of keys in namespaces one cannot see are not theirs to read)."""
    now = now or timezone.now()
    start = now - timedelta(minutes=minutes)
    per_minute: list[int | None] = [None] * minutes
    for at, depth in dispatch.get_queue().depth_history():
        i = int((at - start.timestamp()) // 60)
        if 0 <= i < minutes:
            per_minute[i] = max(per_minute[i] or 0, depth)
    return start, per_minute
