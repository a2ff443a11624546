"""Appending a healing link (`HealingRecord`) to a resource's hash chain.

The caller holds the resource's row locked (`select_for_update`) inside its transaction and saves the row after:
the record chains onto the chain's newest link (`last_transition_hash`), follows the current transition and
revision counts, and moves the head, as a transition or a revision does (`reconcilers.engine.chain_link`, hashed
by `reconcilers.engine.audit_encoding`). A record that
needs a person gets its pending notifications in the same transaction (`notifications.outbox_add_locked`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils import timezone

from reconcilers.engine.chain_link import link_append, link_row
from reconcilers.engine.healing.notifications import outbox_add_locked
from reconcilers.models import HealingRecord, Resource

#: what appending a link changes on the resource's row, besides what the caller changed
HEAD_FIELDS = ("last_healing_seq", "last_transition_hash", "updated_at")


def fields_to_save(*changed: str) -> list[str]:
    """`update_fields` for a row that had healing links appended and the fields `changed` set."""
    return [*changed, *HEAD_FIELDS]


def healing_append(
    resource: Resource,
    action: str,
    *,
    actor: str,
    reason: str = "",
    message: str = "",
    rule: str = "",
    target_generation: int | None = None,
    detail: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
    at: datetime | None = None,
) -> HealingRecord:
    """Append one healing record to `resource`'s chain (locked by the caller; the caller saves the row)."""
    if not actor:
        raise ValueError("a healing record needs an actor")
    # the evidence is stored as JSON: hash what the database will give back
    evidence = json.loads(json.dumps(detail or {}, default=str))
    row = link_append(resource, link_row(
        resource, HealingRecord, action=action, rule=rule[:63], actor=actor[:255], reason=reason, message=message,
        generation=resource.generation, target_generation=target_generation, detail=evidence, expires_at=expires_at,
        created_at=at or timezone.now(),
    ))
    outbox_add_locked(resource, row)  # a record that needs a person: its notifications, in the same transaction
    return row
