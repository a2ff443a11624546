"""Escalation a person acts on: acknowledge, assign and resolve an anomaly that needs a person (`person`).

Each step, with the resource's row locked, in one transaction:
- appends a healing link (`anomaly.acknowledged`, `anomaly.assigned`, `anomaly.resolved`) with the actor
  (`user:<name>`), the rule, the note as its reason and the generation;
- changes the anomaly's entry in `Resource.active_anomalies[rule]`: `acknowledged: {by, at, note, record}`,
  `assignee: {to, by, at, note, record}`;
- resolve removes the anomaly from the active ones and sets `Resource.anomalies_resolved[rule] = {generation,
  record, by, at}` (the rules step does not raise a rule again for the generation it was resolved at); for
  `rollback_failed` the escalated rollback stays on record (marked `resolved`), so the automatic path still never
  rolls the same generation back twice.

A step that cannot be done raises `RollbackRefused` (the services' `HealingRefused`) with the field at fault and an
HTTP status, having written nothing: an unknown rule (400), an anomaly not active (409), one that does not need
a person (409), an empty note on resolve (400), an assignee who is no active user (400).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from reconcilers.engine import metrics
from reconcilers.engine.healing.person import object_rules, person_needed
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.engine.healing.rollback import RollbackRefused
from reconcilers.models import HealingAction, HealingRecord, Resource

NOTE_MAX = 1000
_FIELDS = fields_to_save("active_anomalies", "anomalies_resolved", "rollback")

log = logging.getLogger(__name__)


def clean_note(note: str | None, *, required: bool) -> str:
    """The note stripped; RollbackRefused (field `note`) when required and empty, too long, or with NUL."""
    note = (note or "").strip()
    if required and not note:
        raise RollbackRefused("a note is required: say what was done", field="note", status=400)
    if len(note) > NOTE_MAX:
        raise RollbackRefused(f"at most {NOTE_MAX} characters", field="note", status=400)
    if "\x00" in note:
        raise RollbackRefused("the note must not contain NUL characters", field="note", status=400)
    return note


def _step(resource_id: int, rule: str, do: Callable[[Resource, dict[str, Any]], HealingRecord]) -> HealingRecord:
    """Lock the row, check that `rule` is an active anomaly needing a person, run `do` and save the row."""
    rule = (rule or "").strip()
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        if resource.deleted:
            raise RollbackRefused("the resource is deleted", field="resource")
        rules, auto = object_rules(resource)
        known = {r.name for r in rules} | {metrics.ROLLBACK_FAILED_RULE}
        active = resource.active_anomalies or {}
        if rule not in known and rule not in active:
            raise RollbackRefused(f"no anomaly rule {rule!r} for {resource.kind} (rules: {', '.join(sorted(known))})",
                                  field="rule", status=400)
        if rule not in active:
            raise RollbackRefused(f"the anomaly {rule} is not active on this resource", field="rule")
        if not person_needed(rule, rules, auto, active[rule] if isinstance(active[rule], dict) else None):
            raise RollbackRefused(f"the anomaly {rule} is handled by automatic rollback: it needs no person",
                                  field="rule")
        record = do(resource, dict(active[rule] or {}))
        resource.save(update_fields=_FIELDS)
    log.info("%s: %s %s by %s", resource, record.action, rule, record.actor)
    return record


def anomaly_acknowledge(resource_id: int, rule: str, *, actor: str, note: str = "",
                        now: datetime | None = None) -> HealingRecord:
    """A person took note of the anomaly (see the module docstring)."""
    now, note = now or timezone.now(), clean_note(note, required=False)

    def do(resource: Resource, entry: dict[str, Any]) -> HealingRecord:
        held = entry.get("acknowledged")
        if held:
            raise RollbackRefused(f"already acknowledged by {held.get('by')} at {held.get('at')}", field="rule")
        record = healing_append(resource, HealingAction.ANOMALY_ACKNOWLEDGED, actor=actor, rule=rule, reason=note,
                                message=f"anomaly {rule} acknowledged", at=now,
                                detail={"since": entry.get("since"), "detected": entry.get("record")})
        entry["acknowledged"] = {"by": actor, "at": now.isoformat(), "note": note, "record": record.seq}
        resource.active_anomalies = {**resource.active_anomalies, rule: entry}
        return record

    return _step(resource_id, rule, do)


def anomaly_assign(resource_id: int, rule: str, *, actor: str, assignee: str, note: str = "",
                   now: datetime | None = None) -> HealingRecord:
    """Assign the anomaly to a person (`assignee`: an active user's username), with an optional note."""
    now, note = now or timezone.now(), clean_note(note, required=False)
    username = (assignee or "").strip().removeprefix("user:")
    if not username:
        raise RollbackRefused("name the user to assign it to", field="assignee", status=400)
    if not get_user_model().objects.filter(username=username, is_active=True).exists():
        raise RollbackRefused(f"{username!r} is not a known active user", field="assignee", status=400)
    to = f"user:{username}"

    def do(resource: Resource, entry: dict[str, Any]) -> HealingRecord:
        if (entry.get("assignee") or {}).get("to") == to:
            raise RollbackRefused(f"already assigned to {to}", field="assignee")
        record = healing_append(resource, HealingAction.ANOMALY_ASSIGNED, actor=actor, rule=rule, reason=note,
                                message=f"anomaly {rule} assigned to {to}", at=now,
                                detail={"assignee": to, "previous": (entry.get("assignee") or {}).get("to"),
                                        "since": entry.get("since"), "detected": entry.get("record")})
        entry["assignee"] = {"to": to, "by": actor, "at": now.isoformat(), "note": note, "record": record.seq}
        resource.active_anomalies = {**resource.active_anomalies, rule: entry}
        return record

    return _step(resource_id, rule, do)


def anomaly_resolve(resource_id: int, rule: str, *, actor: str, note: str,
                    now: datetime | None = None) -> HealingRecord:
    """A person resolved the anomaly, saying how (`note`, required): it leaves the active ones."""
    now, note = now or timezone.now(), clean_note(note, required=True)

    def do(resource: Resource, entry: dict[str, Any]) -> HealingRecord:
        record = healing_append(resource, HealingAction.ANOMALY_RESOLVED, actor=actor, rule=rule, reason=note,
                                message=f"anomaly {rule} resolved by {actor}", at=now,
                                detail={"anomaly": entry})
        active = dict(resource.active_anomalies)
        active.pop(rule, None)
        resource.active_anomalies = active
        resource.anomalies_resolved = {**(resource.anomalies_resolved or {}), rule: {
            "generation": resource.generation, "record": record.seq, "by": actor, "at": now.isoformat()}}
        if rule == metrics.ROLLBACK_FAILED_RULE and resource.rollback:
            resource.rollback = {**resource.rollback, "resolved": {"by": actor, "at": now.isoformat(),
                                                                   "note": note, "record": record.seq}}
        return record

    return _step(resource_id, rule, do)
