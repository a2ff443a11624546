"""Conventions over Kubernetes objects that every part of opsconsole shares, each defined once.

- `RECONCILE_REQUESTED_AT`: the manual-reconcile annotation (Flux's convention, DESIGN §3); a reconcile that
  handles its token writes `status.lastHandledReconcileAt`.
- `controller_ref(obj)`: the ownerReference with controller=true of an object (or of its metadata).
- `rfc3339(moment)`, `now_rfc3339()`, `parse_rfc3339(text)`: timestamps as Kubernetes writes and reads them
  (UTC, `Z`; seconds, or microseconds as MicroTime where asked).

Pure functions over dicts: no Django, no Celery, no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

#: the annotation that asks for a reconcile now; its value is an opaque token echoed in the status
RECONCILE_REQUESTED_AT = "opsconsole.io/reconcile-requested-at"
#: the status field a reconcile sets to the token it handled
LAST_HANDLED_RECONCILE_AT = "lastHandledReconcileAt"


def controller_ref(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ownerReference with controller=true (Kubernetes allows at most one), or None. `obj` is an object
    or its metadata."""
    if not obj:
        return None
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else obj
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def rfc3339(moment: datetime, *, micro: bool = False) -> str:
    """`moment` as Kubernetes writes a Time (`2030-01-01T00:00:00Z`) or, `micro`, a MicroTime
    (`2030-01-01T00:00:00.000000Z`). A naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339(*, micro: bool = False) -> str:
    """The current time as `rfc3339` writes it."""
    return rfc3339(datetime.now(UTC), micro=micro)


def parse_rfc3339(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (`Z` or an offset, with or without fractions) as an aware datetime; None for
    anything that is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
