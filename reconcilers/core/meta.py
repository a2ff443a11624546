"""Conventions over Kubernetes objects that every part of opsconsole shares, each defined once.

- `RECONCILE_REQUESTED_AT`: the manual-reconcile annotation (Flux's convention; docs/architecture.md, *Manual
  reconcile*); a reconcile that handles its token writes `status.lastHandledReconcileAt`.
- `controller_ref(obj)`: the ownerReference with controller=true of an object (or of its metadata).
- `rfc3339(moment)`, `now_rfc3339()`, `parse_rfc3339(text)`: timestamps as Kubernetes writes and reads them
  (UTC, `Z`; seconds, or microseconds as MicroTime where asked).
- `FIELD_MANAGER` (`opsconsole-controller`), the field manager of the engine's own writes, and readers of
  `metadata.managedFields` (`last_writer`, `spec_writers`): the name a client *says* it writes under. Any
  client may send any name, so a field manager is only ever a claim (`reconcilers.core.actors`), never how the
  engine recognises its own writes (`reconcilers.engine.provenance` does, by what they returned).
  `spec_diff`: what changed between two specs.
- `request_annotation`: the manual-reconcile request an object carries (ours, or Flux's `requestedAt`).

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
    anything that is not one, or that is out of datetime's range once in UTC."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:  # 9999-12-31T23:59:59-12:00 parses, but is past datetime's range in UTC: comparing it would overflow
        parsed.astimezone(UTC)
    except OverflowError:
        return None
    return parsed


# -- field managers (metadata.managedFields) ---------------------------------------------------------------

#: the field manager of every write the engine makes to the objects it reconciles (status, finalizers, the
#: manual-reconcile annotation). Only a name: anyone may write under it, so it never proves a write is the engine's
FIELD_MANAGER = "opsconsole-controller"
#: Flux's manual-reconcile annotation, honoured as an alias of RECONCILE_REQUESTED_AT (a setting turns it off)
FLUX_REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"


def _fields_node(entry: dict[str, Any], path: tuple[str, ...]) -> bool:
    """Whether a managedFields entry owns the field at `path` (keys from the object's root) or something under
    it. A leaf (`{}`) reached before the path's end owns the whole subtree."""
    node = entry.get("fieldsV1") if isinstance(entry, dict) else None
    if not isinstance(node, dict):
        return False
    for key in path:
        if not node:  # a leaf above the path: the entry owns the whole value
            return True
        node = node.get(f"f:{key}")
        if not isinstance(node, dict):
            return False
    return True


def managed_fields(obj: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The object's managedFields entries, or None when the server records none (an old server)."""
    entries = ((obj or {}).get("metadata") or {}).get("managedFields")
    if not isinstance(entries, list) or not entries:
        return None
    return [e for e in entries if isinstance(e, dict)]


def field_owners(obj: dict[str, Any] | None, path: tuple[str, ...]) -> list[dict[str, Any]] | None:
    """The managedFields entries owning the field at `path` (or something under it), newest first; None when
    the object has no managedFields at all."""
    entries = managed_fields(obj)
    if entries is None:
        return None
    owners = [e for e in entries if _fields_node(e, path)]
    return sorted(owners, key=lambda e: parse_rfc3339(e.get("time")) or datetime.min.replace(tzinfo=UTC),
                  reverse=True)


def last_writer(obj: dict[str, Any] | None, path: tuple[str, ...]) -> dict[str, Any] | None:
    """The entry that last wrote the field at `path`, as far as managedFields tell: the owner with the latest
    `time`; on a tie, the first of them in managedFields' order (no name is preferred or passed over: the answer
    is a claim either way). An empty dict when managedFields exist but nobody owns the field; None when there
    are no managedFields."""
    owners = field_owners(obj, path)
    if owners is None:
        return None
    return owners[0] if owners else {}


def manager_summary(entry: dict[str, Any]) -> dict[str, Any]:
    """A managedFields entry without its field set: manager, operation, time (and subresource when given)."""
    out = {"manager": str(entry.get("manager") or ""), "operation": str(entry.get("operation") or ""),
           "time": entry.get("time") or ""}
    if entry.get("subresource"):
        out["subresource"] = entry["subresource"]
    return out


def request_annotation(obj: dict[str, Any], annotations: tuple[str, ...] = (RECONCILE_REQUESTED_AT,)
                       ) -> tuple[str, str] | None:
    """(annotation, token) of the newest manual-reconcile request on the object among `annotations`, or None.
    With several set, the one written last wins (its managedFields time, then its value as a timestamp, then
    the order of `annotations`), so the choice is stable and a handled token never makes another one
    unhandled again."""
    values = ((obj.get("metadata") or {}).get("annotations") or {})
    found = [(name, str(values[name])) for name in annotations if values.get(name)]
    if len(found) <= 1:
        return found[0] if found else None
    floor = datetime.min.replace(tzinfo=UTC)

    def rank(item: tuple[int, tuple[str, str]]) -> tuple[datetime, datetime, int]:
        index, (name, token) = item
        writer = last_writer(obj, ("metadata", "annotations", name)) or {}
        return (parse_rfc3339(writer.get("time")) or floor, parse_rfc3339(token) or floor, -index)

    return max(enumerate(found), key=rank)[1]


# -- spec diffs ----------------------------------------------------------------------------------------------

_MISSING = object()


def spec_diff(old: Any, new: Any, path: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """What changed from `old` to `new` (JSON values): a list of {path, op, old, new}, `path` a JSON pointer
    (`/replicas`, `/resources/limits/cpu`), `op` add / remove / replace. Maps are compared key by key; lists
    and scalars as whole values. Sorted by path."""
    out: list[dict[str, Any]] = []
    _diff_into(out, old, new, path)
    return sorted(out, key=lambda change: change["path"])


def _diff_into(out: list[dict[str, Any]], old: Any, new: Any, path: tuple[str, ...]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            _diff_into(out, old.get(key, _MISSING), new.get(key, _MISSING), (*path, str(key)))
        return
    if old is _MISSING and new is _MISSING:
        return
    if old is not _MISSING and new is not _MISSING and old == new and type(old) is type(new):
        return
    pointer = "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path) if path else ""
    op = "add" if old is _MISSING else "remove" if new is _MISSING else "replace"
    out.append({"path": pointer, "op": op, "old": None if old is _MISSING else old,
                "new": None if new is _MISSING else new})


def pointer_parts(pointer: str) -> tuple[str, ...]:
    """The keys of a JSON pointer made by `spec_diff`."""
    if not pointer:
        return ()
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/"))


def spec_writers(obj: dict[str, Any], changes: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Who wrote the spec changes `changes` (from `spec_diff`), as managedFields tell: the entries owning a
    changed field under `spec` (a removed field is owned by nobody: then every entry owning part of the spec),
    summarised (`manager_summary`), newest first. None when the object has no managedFields."""
    entries = managed_fields(obj)
    if entries is None:
        return None
    paths = [("spec", *pointer_parts(change["path"])) for change in changes]
    owners = [e for e in entries if any(_fields_node(e, path) for path in paths)]
    if not owners:
        owners = [e for e in entries if _fields_node(e, ("spec",))]
    floor = datetime.min.replace(tzinfo=UTC)
    owners.sort(key=lambda e: parse_rfc3339(e.get("time")) or floor, reverse=True)
    return [manager_summary(e) for e in owners]

#: self-healing's annotations: suspend the object's reconciles (the value is the reason), until when (RFC 3339,
#: optional), and turn automatic rollback on or off for this one object ("true" / "false")
SUSPENDED = "opsconsole.io/suspended"
SUSPENDED_UNTIL = "opsconsole.io/suspended-until"
AUTO_ROLLBACK = "opsconsole.io/auto-rollback"
#: the field manager a rollback writes the restored spec with: the revision it makes names it as the actor
ROLLBACK_FIELD_MANAGER = "opsconsole-rollback"
#: the id of the rollback whose PUT wrote the restored spec (a uuid, on record in `rollback.started` before the
#: write): after a crash between the write and its record, its presence on the object says the write landed
ROLLBACK_ID = "opsconsole.io/rollback-id"
#: the digest of the manifest a child was last applied with (`Context.apply_child`): with the child's values it
#: tells that applying the same manifest again would change nothing, so no PATCH is sent
APPLIED_DIGEST = "opsconsole.io/applied-digest"
