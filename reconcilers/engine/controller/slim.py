"""What the controller's informers keep of each object in memory (issue 40: memory per object that fits a fleet).

The informer caches are read for the previous state of an object when a watch reports a change (the event filters of
`events.py`, the owner walk's old owner, the archive's previous Event count), for the annotations the healing step
reads, and for the last state of an object a re-list finds gone (its deletion is recorded from it). The handlers get
the object as the watch delivered it, managedFields included: what goes into the Redis object cache (the runner's
read, provenance's managedFields) and the mirror is unchanged. So the caches keep less:

- `slim` (the reconciled and owned kinds; `reconcilers.engine.leanobject`, which the object cache's children share):
  the object without `metadata.managedFields` and without the
  `kubectl.kubernetes.io/last-applied-configuration` annotation (kubectl's client-side apply copies the whole
  object into it). Everything else stays: what the filters compare (generation, deletionTimestamp, finalizers,
  annotations, and for a child everything but resourceVersion), ownerReferences, labels, spec and status.
- `event_stub` (core/v1 Events): what the archive reads of an Event's previous state, its uid and count, and what
  the informer itself needs (name, namespace, resourceVersion).

Each kept object is stored packed (`pack`: compact JSON bytes, about a sixth of the memory of the same object as
Python dicts) and unpacked when read (`unpack`), a fresh dict each time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconcilers.engine import jsonfast
from reconcilers.engine.leanobject import LAST_APPLIED, slim

__all__ = ["LAST_APPLIED", "Keep", "event_stub", "pack", "slim", "unpack"]

#: what an informer keeps of an object (None: the object as delivered)
Keep = Callable[[dict[str, Any]], dict[str, Any]]

#: the metadata fields of an Event's stub
_EVENT_METADATA = ("name", "namespace", "uid", "resourceVersion")


def event_stub(event: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a core/v1 Event: metadata name, namespace, uid and resourceVersion, `count` and
    `series.count` (the archive's `event_count` of a previous state)."""
    meta = event.get("metadata") or {}
    stub: dict[str, Any] = {"metadata": {k: meta[k] for k in _EVENT_METADATA if k in meta}}
    if "count" in event:
        stub["count"] = event["count"]
    series = event.get("series")
    if isinstance(series, dict) and "count" in series:
        stub["series"] = {"count": series["count"]}
    return stub


def pack(obj: dict[str, Any]) -> bytes:
    """An object as the cache stores it (compact JSON), in a bytes object of its own size: orjson's answer keeps the
    buffer it was written in (4 KiB at least), which a cache of many small objects must not hold on to."""
    return bytes(memoryview(jsonfast.dumps(obj)))


def unpack(data: bytes) -> dict[str, Any]:
    """An object the cache stored, as a new dict."""
    value: dict[str, Any] = jsonfast.loads(data)
    return value
