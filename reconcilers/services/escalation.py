"""Escalation and notifications as the console, the API and the commands ask for them.

Actions (`actor` is `user:<name>`; each raises `HealingRefused` with the field at fault and an HTTP status when it
cannot be done, having written nothing; see `reconcilers.engine.healing.escalation`):
- `anomaly_acknowledge`: a person took note of an anomaly that needs one (an optional note);
- `anomaly_assign`: it is assigned to a user (`assignee`: the username);
- `anomaly_resolve`: a person resolved it (a note is required); the resource is enqueued, so its
  `AnomalyDetected` condition follows.

Reads: `rules_needing_person` (which active anomalies of a resource need a person) and `record_deliveries` (the
notification deliveries of healing records, for the Healing panel and the API).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from reconcilers.engine import dispatch
from reconcilers.engine.healing import escalation, notifications, person
from reconcilers.engine.healing.rollback import RollbackRefused
from reconcilers.models import HealingRecord, NotificationDelivery, Resource

#: the error every escalation action raises when it cannot be done (`.field`, `.status`, `.message`)
HealingRefused = RollbackRefused

#: the escalation actions by name (the API's sub-paths, the console's forms, the command's argument)
STEPS = ("acknowledge", "assign", "resolve")

log = logging.getLogger(__name__)


def anomaly_acknowledge(resource: Resource, rule: str, *, actor: str, note: str = "") -> HealingRecord:
    """Acknowledge the anomaly `rule` of `resource`."""
    return escalation.anomaly_acknowledge(resource.pk, rule, actor=actor, note=note)


def anomaly_assign(resource: Resource, rule: str, *, actor: str, assignee: str, note: str = "") -> HealingRecord:
    """Assign the anomaly `rule` of `resource` to the user `assignee`."""
    return escalation.anomaly_assign(resource.pk, rule, actor=actor, assignee=assignee, note=note)


def anomaly_resolve(resource: Resource, rule: str, *, actor: str, note: str) -> HealingRecord:
    """Resolve the anomaly `rule` of `resource` and enqueue the resource (its conditions follow)."""
    record = escalation.anomaly_resolve(resource.pk, rule, actor=actor, note=note)
    try:
        dispatch.enqueue_many([resource.key])
    except Exception:  # the record is written; the next reconcile updates the condition anyway
        log.warning("could not enqueue %s after resolving %s", resource.key, rule, exc_info=True)
    return record


def anomaly_step(step: str, resource: Resource, rule: str, *, actor: str, note: str = "",
                 assignee: str = "") -> HealingRecord:
    """One of `STEPS` by name."""
    if step == "acknowledge":
        return anomaly_acknowledge(resource, rule, actor=actor, note=note)
    if step == "assign":
        return anomaly_assign(resource, rule, actor=actor, assignee=assignee, note=note)
    if step == "resolve":
        return anomaly_resolve(resource, rule, actor=actor, note=note)
    raise ValueError(f"unknown escalation step {step!r}")


def rules_needing_person(resource: Resource) -> list[str]:
    """The resource's active anomalies that need a person (`reconcilers.engine.healing.person`)."""
    return person.rules_needing_person(resource)


def record_deliveries(records: Iterable[HealingRecord]) -> dict[int, list[dict[str, Any]]]:
    """{healing record id: its deliveries}, each {receiver, url, state (delivered, pending, retrying, failed),
    attempts, last_status, last_error, next_attempt_at, delivered_at}."""
    ids = [r.pk for r in records]
    out: dict[int, list[dict[str, Any]]] = {}
    if not ids:
        return out
    for row in NotificationDelivery.objects.filter(record_id__in=ids).order_by("record_id", "receiver"):
        out.setdefault(row.record_id, []).append({
            "receiver": row.receiver, "url": row.url, "state": notifications.delivery_state(row),
            "attempts": row.attempts, "last_status": row.last_status, "last_error": row.last_error,
            "next_attempt_at": row.next_attempt_at if row.state == NotificationDelivery.State.PENDING else None,
            "delivered_at": row.delivered_at,
        })
    return out
