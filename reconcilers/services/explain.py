"""Why an object is in its state, in one place and from the record (issue 42): the console's first panel on the
detail page, `GET …/explain` and `manage.py explain KEY` all show this.

The answer, each part with what the console links to:

- the current phase and since when (`Resource.phase`, `phase_since`);
- the transition that led to it (the chain's head: from, to, reason, message, actor and how it was established);
- the run that made it (result, attempt, duration, operator version, its trace);
- that run's triggers (`ReconcileRun.triggers`, in words, each with its actor and how it was established) and
  how many were coalesced beyond the bound;
- the children's health at that time: the children the run's triggers name (what changed in them), and the
  Kubernetes Events of its children archived in the `CHILD_EVENTS_BEFORE` before the transition (Warnings first);
- the open anomalies (a reconcile loop names its trigger).

Reads only indexed rows: the transition by (resource, seq), its run by id, Events by (resource, last_timestamp),
anomalies by resource. Nothing is read from the cluster.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from reconcilers.core import actors
from reconcilers.engine import triggers
from reconcilers.models import Anomaly, KubeEvent, ReconcileRun, Resource, Transition
from reconcilers.services.selectors.filters import namespace_q

#: how far before the transition the children's Events count as "at that time"
CHILD_EVENTS_BEFORE = timedelta(minutes=10)
#: at most this many children's Events are shown
CHILD_EVENTS_MAX = 10


def _actor(actor: str) -> dict[str, str]:
    established = actors.established(actor)
    return {"actor": actor, "established": established, "established_text": actors.ESTABLISHED[established]}


def _trigger(t: dict[str, Any]) -> dict[str, Any]:
    out = {"type": str(t.get("type") or ""), "label": triggers.label(t), "text": triggers.describe(t),
           "at": t.get("at"), **_actor(str(t.get("actor") or ""))}
    for name in ("object", "fields", "event", "role", "request", "reason", "error_class", "run", "loop"):
        if t.get(name) not in (None, "", []):
            out[name] = t[name]
    return out


def _transition(row: Transition) -> dict[str, Any]:
    return {"id": row.id, "seq": row.seq, "from_phase": row.from_phase, "to_phase": row.to_phase,
            "reason": row.reason, "message": row.message, "at": row.created_at, "generation": row.generation,
            "trace_id": row.trace_id, **_actor(row.actor)}


def _run(run: ReconcileRun) -> dict[str, Any]:
    return {"id": run.id, "started_at": run.started_at, "result": run.result, "attempt": run.attempt,
            "duration_seconds": run.duration_seconds, "error_class": run.error_class, "trace_id": run.trace_id,
            "operator_version": run.operator_version, "request_id": str(run.request_id) if run.request_id else None,
            "triggers": [_trigger(t) for t in run.triggers or []], "triggers_dropped": run.triggers_dropped}


def _children(resource: Resource, run: dict[str, Any] | None, at: datetime | None) -> dict[str, Any]:
    changed = [t for t in (run or {}).get("triggers", []) if t.get("role") == triggers.CHILD]
    events: list[dict[str, Any]] = []
    if at is not None:
        rows = (KubeEvent.objects.filter(resource=resource, last_timestamp__gte=at - CHILD_EVENTS_BEFORE,
                                         last_timestamp__lte=at)
                .exclude(involved_uid=resource.uid)
                .order_by("-last_timestamp")[:CHILD_EVENTS_MAX * 3])
        events = [{"type": e.type, "reason": e.reason, "message": e.message, "at": e.last_timestamp,
                   "object": {"kind": e.involved_kind, "namespace": e.involved_namespace, "name": e.involved_name}}
                  for e in rows]
        events.sort(key=lambda e: e["type"] != "Warning")  # Warnings first, each group newest first
        events = events[:CHILD_EVENTS_MAX]
    warnings = sum(1 for e in events if e["type"] == "Warning")
    if warnings:
        summary = f"{warnings} Warning Event{'s' if warnings > 1 else ''} from its children before the transition"
    elif changed or events:
        summary = "its children reported no warnings before the transition"
    else:
        summary = "nothing on record about its children at that time"
    return {"summary": summary, "changed": changed, "events": events, "warnings": warnings}


def explain(resource: Resource) -> dict[str, Any]:
    """Why `resource` is in its phase (see the module docstring): a dict of plain values and the sentence
    `summary` that says it in words."""
    transition = (Transition.objects.filter(resource=resource, seq=resource.last_transition_seq).first()
                  if resource.last_transition_seq else None)
    run_row = (ReconcileRun.objects.filter(id=transition.run_id).first()
               if transition is not None and transition.run_id else None)
    run = _run(run_row) if run_row is not None else None
    children = _children(resource, run, transition.created_at if transition is not None else None)
    anomalies = [{"id": a.id, "category": a.category, "detail": a.detail, "at": a.created_at,
                  "trigger": (a.observed or {}).get("signature", "")}
                 for a in Anomaly.objects.filter(resource=resource).order_by("-created_at")[:5]]
    return {"resource": {"id": resource.id, "key": resource.key, "kind": resource.kind,
                         "namespace": resource.namespace, "name": resource.name, "deleted": resource.deleted},
            "phase": resource.phase, "since": resource.phase_since,
            "transition": _transition(transition) if transition is not None else None,
            "run": run, "children": children, "anomalies": anomalies,
            "summary": summary(resource, transition, run, children)}


def summary(resource: Resource, transition: Transition | None, run: dict[str, Any] | None,
            children: dict[str, Any]) -> str:
    """The answer in a few sentences."""
    if not resource.phase:
        return f"{resource.kind} {resource.key} has no phase on record yet: no reconcile recorded one."
    parts = [f"{resource.kind} {resource.namespace + '/' if resource.namespace else ''}{resource.name} is "
             f"{resource.phase}" + (f" since {resource.phase_since:%Y-%m-%d %H:%M:%S} UTC." if resource.phase_since
                                    else ".")]
    if transition is not None:
        why = f": {transition.reason}" if transition.reason else ""
        who = "" if transition.actor == actors.ENGINE else f", by {transition.actor}"
        parts.append(f"Transition #{transition.seq} {transition.from_phase or '(none)'} -> {transition.to_phase}"
                     f"{why}{who}.")
    if run is not None:
        parts.append(f"Made by run {run['id']} ({run['result']}, attempt {run['attempt']}).")
        found = run["triggers"]
        if found:
            text = "; ".join(t["text"] for t in found[:3])
            more = len(found) - 3 + run["triggers_dropped"]
            parts.append(f"It ran because: {text}{f' (and {more} more)' if more > 0 else ''}.")
        else:
            parts.append("Its triggers are not on record (a run before triggers were recorded, or run by hand).")
    elif transition is not None:
        parts.append("No run on record made it (a deletion or a rollback recorded it).")
    parts.append(children["summary"][0].upper() + children["summary"][1:] + ".")
    return " ".join(parts)


def run_visible(run_id: int, *, namespaces: frozenset[str] | None = None) -> ReconcileRun:
    """One run by id if its resource is visible to a caller limited to `namespaces` (ReconcileRun.DoesNotExist
    otherwise: an invisible run does not exist)."""
    return (ReconcileRun.objects.select_related("resource")
            .filter(namespace_q(namespaces, column="resource__namespace")).get(pk=run_id))


def run_triggers(run: ReconcileRun) -> list[dict[str, Any]]:
    """A run's triggers as the answer shows them (in words, with how each actor was established)."""
    return [_trigger(t) for t in run.triggers or []]
