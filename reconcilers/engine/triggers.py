"""Why a key was enqueued: the triggers that travel with it from the controller through the workqueue to its run.

A trigger is a small dict (JSON), one of:

- `{"type": "event", "role": "self"|"child", "event": "ADDED"|"MODIFIED"|"DELETED", "object": {kind, namespace,
  name}, "fields": [...], "actor": ..., "established": ..., "at": epoch}`: a watch event of the reconciled object
  itself (`self`: its generation, deletionTimestamp, finalizers or an annotation changed) or of a child it owns
  (`child`: its spec, status, metadata changed). The actor is the field manager of the write as managedFields tell
  (`manager:<name>`: a claim, `established` says so); the run upgrades a spec change's claim to the user the API
  server authenticated when an admitted write proves it (`reconcilers.engine.trigger_actors`).
- `{"type": "manual", "token": ...}`: the reconcile-requested-at annotation changed; the run adds the request's
  id and actor from the record.
- `{"type": "resync"}`: the periodic (or after-outage) resync.
- `{"type": "requeue", "reason": "error"|"retry_after"|"requeue"|"requeue_after", "error_class": ...}`: the
  previous run put the key back.
- `{"type": "rollback", "actor": ...}`: a rollback's spec write (a self event the run recognises as its own).

Coalesced triggers are kept together, oldest first, at most `BOUND`; beyond, they are only counted (`dropped`).
Between the controller and the run they travel as `encode`d text (`<dropped>` then one JSON per line) in the
workqueue's `why` hash (`reconcilers.engine.workqueue.lua`): appended by `note`, taken with the claim.

Pure functions and one small counter (`LoopCounter`), no Django, no I/O.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from reconcilers.core import actors
from reconcilers.core.meta import field_owners

#: triggers kept per run, at most (beyond: counted in `dropped`)
BOUND = 8
#: the same trigger re-enqueuing the same key more often than this in a minute is a loop (anomaly)
LOOP_PER_MINUTE = 20

EVENT, MANUAL, RESYNC, REQUEUE, ROLLBACK = "event", "manual", "resync", "requeue", "rollback"
SELF, CHILD = "self", "child"


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _latest_manager(obj: dict[str, Any] | None, status: bool) -> str:
    """The field manager of the newest managedFields entry (of the status subresource when `status`, else of the
    main resource): the writer of what changed, as far as managedFields tell. RFC 3339 times in UTC compare as
    text. '' when none."""
    best, best_time = "", ""
    for entry in _meta(obj).get("managedFields") or ():
        if not isinstance(entry, dict) or (entry.get("subresource") == "status") != status:
            continue
        at = str(entry.get("time") or "")
        if at >= best_time:
            best, best_time = str(entry.get("manager") or ""), at
    return best


def _actor(manager: str) -> dict[str, str]:
    actor = actors.manager_claim(manager) if manager else actors.UNKNOWN
    return {"actor": actor, "established": actors.established(actor)}


def _object(kind: str, obj: dict[str, Any]) -> dict[str, str]:
    meta = _meta(obj)
    return {"kind": kind, "namespace": str(meta.get("namespace") or ""), "name": str(meta.get("name") or "")}


def primary_fields(new: dict[str, Any] | None, old: dict[str, Any] | None, watched: Iterable[str]) -> list[str]:
    """What changed in a reconciled object that makes it enqueued: `generation`, `deletionTimestamp`,
    `finalizers`, and `annotation:<name>` for each of the `watched` annotations."""
    n, o = _meta(new), _meta(old)
    out = [name for name in ("generation", "deletionTimestamp") if n.get(name) != o.get(name)]
    if (n.get("finalizers") or []) != (o.get("finalizers") or []):
        out.append("finalizers")
    na, oa = n.get("annotations") or {}, o.get("annotations") or {}
    out.extend(f"annotation:{name}" for name in watched if na.get(name) != oa.get(name))
    return out


def child_fields(new: dict[str, Any] | None, old: dict[str, Any] | None) -> list[str]:
    """What changed in a child: `spec`, `status`, `labels`, `annotations`, `ownerReferences`, `deletionTimestamp`
    (the parts an owner's reconcile reads)."""
    new, old = new or {}, old or {}
    out = [part for part in ("spec", "status") if new.get(part) != old.get(part)]
    n, o = _meta(new), _meta(old)
    out.extend(name for name in ("labels", "annotations", "ownerReferences", "deletionTimestamp")
               if n.get(name) != o.get(name))
    return out


def _writer(obj: dict[str, Any], fields: list[str]) -> str:
    """The field manager that last wrote what changed, as managedFields tell (a claim): of the status when only
    the status changed, of the spec for a new generation (or a child's spec), else the newest entry."""
    path = (("status",) if fields and all(f == "status" for f in fields)
            else ("spec",) if "generation" in fields or "spec" in fields else None)
    if path is not None:
        owners = field_owners(obj, path) or []  # newest first; ties in managedFields' order
        if owners:
            newest = [e for e in owners if e.get("time") == owners[0].get("time")]
            return str(newest[-1].get("manager") or "")  # a tie (times are whole seconds): the later entry
    return _latest_manager(obj, path == ("status",))


def event_trigger(event_type: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None, *, role: str,
                  fields: list[str], at: float | None = None) -> dict[str, Any]:
    """The trigger of one watch event (see the module docstring). The actor is the field manager that last wrote
    what changed (`_writer`): a claim."""
    manager = _writer(obj, fields) if event_type != "DELETED" else ""
    return {"type": EVENT, "role": role, "event": event_type, "object": _object(kind, obj), "fields": fields,
            **_actor(manager), "at": round(at if at is not None else time.time(), 3)}


def manual_trigger(token: str, at: float | None = None) -> dict[str, Any]:
    """A manual request asked through the annotation (its token; the run names the request and its actor)."""
    return {"type": MANUAL, "token": token, "at": round(at if at is not None else time.time(), 3)}


def resync_trigger(at: float | None = None) -> dict[str, Any]:
    """The periodic resync (or the resync after the workqueue lost its keys)."""
    return {"type": RESYNC, "actor": actors.ENGINE, "established": "engine",
            "at": round(at if at is not None else time.time(), 3)}


def requeue_trigger(reason: str, *, error_class: str = "", run_id: int | None = None, delay: float | None = None,
                    at: float | None = None) -> dict[str, Any]:
    """The previous run put the key back: after an error (`error`, `retry_after`), at once (`requeue`) or after
    its RequeueAfter (`requeue_after`)."""
    out: dict[str, Any] = {"type": REQUEUE, "reason": reason, "actor": actors.ENGINE, "established": "engine",
                           "at": round(at if at is not None else time.time(), 3)}
    if error_class:
        out["error_class"] = error_class[:120]
    if run_id is not None:
        out["run"] = run_id
    if delay is not None:
        out["delay"] = round(delay, 3)
    return out


def label(trigger: dict[str, Any]) -> str:
    """The `trigger` label of opsconsole_reconcile_triggers_total: `watch` (the object itself changed), `child`,
    `created`, `deleted`, `manual`, `resync`, `rollback`, or `requeue_<reason>`."""
    kind = trigger.get("type")
    if kind == EVENT:
        if trigger.get("role") == CHILD:
            return "child"
        return {"ADDED": "created", "DELETED": "deleted"}.get(str(trigger.get("event")), "watch")
    if kind == REQUEUE:
        return f"requeue_{trigger.get('reason') or 'requeue'}"
    return str(kind or "unknown")


def signature(trigger: dict[str, Any]) -> str:
    """What makes two triggers "the same" for loop detection: its label, the object it came from and the fields
    that changed (not its time nor actor)."""
    obj = trigger.get("object") or {}
    where = f"{obj.get('kind', '')}/{obj.get('namespace', '')}/{obj.get('name', '')}" if obj else ""
    return f"{label(trigger)} {where} {','.join(trigger.get('fields') or ())}".strip()


def describe(trigger: dict[str, Any]) -> str:
    """The trigger in words (the console, `manage.py explain`)."""
    kind = trigger.get("type")
    who = trigger.get("actor") or ""
    by = f" by {who} ({trigger.get('established', actors.established(who))})" if who else ""
    if kind == EVENT:
        obj = trigger.get("object") or {}
        where = f"{obj['namespace']}/" if obj.get("namespace") else ""
        name = f"{obj.get('kind', '')} {where}{obj.get('name', '')}"
        what = {"ADDED": "created", "DELETED": "deleted"}.get(str(trigger.get("event")), "changed")
        fields = ", ".join(trigger.get("fields") or ())
        role = "child " if trigger.get("role") == CHILD else ""
        return f"{role}{name} {what}{' (' + fields + ')' if fields else ''}{by}"
    if kind == MANUAL:
        request = f" {trigger['request']}" if trigger.get("request") else ""
        return f"manual request{request}{by}"
    if kind == RESYNC:
        return "periodic resync"
    if kind == REQUEUE:
        reason = {"error": "after an error", "retry_after": "after a temporary error",
                  "requeue": "at once, as the previous run asked",
                  "requeue_after": "after the delay the previous run asked"}.get(str(trigger.get("reason")), "")
        err = f" ({trigger['error_class']})" if trigger.get("error_class") else ""
        return f"requeued {reason}{err}".strip()
    if kind == ROLLBACK:
        return f"rollback{by}"
    return str(kind)


# -- coalescing and the wire format ---------------------------------------------------------------------------


def merge(kept: list[dict[str, Any]], dropped: int, more: Iterable[dict[str, Any]], bound: int = BOUND
          ) -> tuple[list[dict[str, Any]], int]:
    """`more` appended to `kept` up to `bound`; the rest counted in `dropped`."""
    kept = list(kept)
    for trigger in more:
        if len(kept) < bound:
            kept.append(trigger)
        else:
            dropped += 1
    return kept, dropped


def encode(triggers: Iterable[dict[str, Any]], dropped: int = 0) -> str:
    """Triggers as the workqueue's `why` entry holds them (and `WorkQueue.note` appends them): `<dropped>` then one
    compact JSON per line."""
    return f"{dropped}\n" + "".join(json.dumps(t, separators=(",", ":"), sort_keys=True) + "\n" for t in triggers)


def decode(raw: str | bytes | None) -> tuple[list[dict[str, Any]], int]:
    """A `why` entry (`<dropped>\\n` then one JSON per line) → (triggers, dropped). A malformed line is skipped
    (counted as dropped): a run never fails on it."""
    if not raw:
        return [], 0
    text = raw.decode() if isinstance(raw, bytes) else raw
    head, _, body = text.partition("\n")
    try:
        dropped = int(head)
    except ValueError:
        return [], 0
    triggers: list[dict[str, Any]] = []
    for line in body.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            dropped += 1
            continue
        if isinstance(value, dict):
            triggers.append(value)
    return triggers, dropped


class LoopCounter:
    """How often the same trigger (`signature`) enqueued the same key in the current minute (a fixed window,
    cleared as the next begins: memory bounded by a minute's distinct pairs). `count` returns the new count; a
    count over `limit` marks a loop."""

    def __init__(self, limit: int = LOOP_PER_MINUTE, window: float = 60.0) -> None:
        self.limit, self.window = limit, window
        self._started = -float("inf")
        self._counts: dict[tuple[str, str], int] = {}

    def count(self, key: str, trigger: dict[str, Any], now: float) -> int:
        if now - self._started >= self.window:
            self._started, self._counts = now, {}
        pair = (key, signature(trigger))
        n = self._counts.get(pair, 0) + 1
        self._counts[pair] = n
        return n

    def mark(self, key: str, trigger: dict[str, Any], now: float) -> dict[str, Any]:
        """`trigger`, with `loop` (the count this minute) when it is over the limit."""
        n = self.count(key, trigger, now)
        return {**trigger, "loop": n} if n > self.limit else trigger
