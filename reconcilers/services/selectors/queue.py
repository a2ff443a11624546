"""Reads of the workqueue: pending, processing and backing-off keys with failure counts and next retry,
as wall-clock times, limited to the namespaces the caller may see."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconcilers.core.types import Request
from reconcilers.engine import dispatch


def _namespace_of(key: str) -> str | None:
    try:
        return Request.from_key(key).namespace
    except ValueError:
        return None


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def queue_snapshot(*, namespaces: frozenset[str] | None = None, limit: int = 1000) -> dict[str, Any]:
    """The queue's state now. Counts are the whole queue's; the item lists hold only visible keys."""
    snap = dispatch.get_queue().snapshot(limit=limit)

    def visible(key: str) -> bool:
        return namespaces is None or _namespace_of(key) in namespaces

    return {
        "name": snap.name,
        "now": _when(snap.now),
        "depth": snap.depth,
        "processing_count": snap.processing_count,
        "delayed_count": snap.delayed_count,
        "pending": [{"key": p.key, "queued_at": _when(p.queued_at), "waiting_seconds": max(0.0, snap.now - p.queued_at)}
                    for p in snap.pending if visible(p.key)],
        "processing": [{"key": p.key, "owner": p.owner, "since": _when(p.since),
                        "lease_expires": _when(p.lease_expires), "dirty": p.dirty}
                       for p in snap.processing if visible(p.key)],
        "backing_off": [{"key": d.key, "failures": d.failures, "next_retry": _when(d.next_retry),
                         "retry_in_seconds": max(0.0, d.next_retry - snap.now)}
                        for d in snap.backing_off if visible(d.key)],
    }
