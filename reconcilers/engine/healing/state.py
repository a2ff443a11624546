"""A resource's healing state as a run reads it, and the conditions healing keeps on the object.

The state lives on the `Resource` row (changed with the row locked, next to the healing record that says why):
`active_anomalies` ({rule: {since, message, record}}), `suspended` / `suspension` ({actor, reason, at, until}),
`rollback` ({state, actor, by, from_generation, to_generation, generation, started_at, deadline, reason, ...}; its
states: writing, in_progress, succeeded, failed, refused, deferred — `healing.rollback`) and `pinned_generation`.
`resource_state` reads it with the phase in one query; `healing_view` turns it into what the reconcile step needs
(`step.HealingView`).

Conditions (metav1.Condition, set by every status write while they apply, turned False when they no longer do):
- `AnomalyDetected`: True while a rule matches (reason: the rule, CamelCase; message: each rule's evidence);
- `RollingBack`: True while a rollback's restored generation is verified; False (reason RolledBack) after;
- `RollbackFailed`: True when a rollback failed or could not be done (escalated to a person).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import OuterRef, Subquery

from reconcilers.core.types import Condition
from reconcilers.engine.recording_reads import ChainHead, reserve_run_id_sql
from reconcilers.engine.sqljson import execute
from reconcilers.engine.step import HealingView
from reconcilers.models import Resource, SpecRevision

IN_PROGRESS, SUCCEEDED, FAILED, REFUSED = "in_progress", "succeeded", "failed", "refused"
#: on record, its write not yet confirmed (`rollback.started`, no `rollback.applied`); a re-apply not rolled back yet
WRITING, DEFERRED = "writing", "deferred"
ANOMALY_DETECTED, ROLLING_BACK, ROLLBACK_FAILED = "AnomalyDetected", "RollingBack", "RollbackFailed"


@dataclass(frozen=True)
class RecordedState:
    """The phase on record and the healing state of one resource."""

    id: int
    phase: str
    generation: int
    suspended: bool = False
    suspension: dict[str, Any] | None = None
    rollback: dict[str, Any] | None = None
    active_anomalies: dict[str, Any] = field(default_factory=dict)
    head: ChainHead | None = None  # read with `head=True`: what a one-statement record swaps against
    resource_version: str = ""  # the mirror's: the newest version of the object the record has seen

    @property
    def rollback_state(self) -> str:
        """The rollback's state ('' when none)."""
        return str((self.rollback or {}).get("state") or "")


_FIELDS = ("id", "phase", "generation", "suspended", "suspension", "rollback", "active_anomalies", "resource_version")
_HEAD_FIELDS = ("kind", "namespace", "name", "phase_since", "last_transition_seq", "last_transition_hash",
                "last_revision_seq", "deleted")


def resource_state(uid: str, *, head: bool = False) -> RecordedState | None:
    """The phase and healing state on record for the object `uid` (None: no record yet). `head`: with the chain
    head and a reserved run id in the same query (`recording_reads.ChainHead`, for a run's one-statement record)."""
    if head and (reserve := reserve_run_id_sql()) is not None:
        row = _state_with_head(uid, reserve)  # every run asks: one fixed statement, not the ORM's query building
    else:
        rows = Resource.objects.filter(uid=uid)
        fields: tuple[str, ...] = _FIELDS
        if head:
            newest = SpecRevision.objects.filter(resource_uid=OuterRef("uid")).order_by("-seq").values("generation")
            rows = rows.annotate(revision_generation=Subquery(newest[:1]))
            fields = (*_FIELDS, *_HEAD_FIELDS, "revision_generation")
        row = rows.values(*fields).first()
    if row is None:
        return None
    chain = None
    if head:
        chain = ChainHead(row["id"], row["kind"], row["namespace"], row["name"], row["phase"], row["phase_since"],
                          row["last_transition_seq"], row["last_transition_hash"], row["last_revision_seq"],
                          row["revision_generation"], row["rollback"] is None, row["deleted"], row.get("next_run_id"))
    return RecordedState(row["id"], row["phase"], row["generation"], row["suspended"], row["suspension"],
                         row["rollback"], row["active_anomalies"] or {}, chain, row["resource_version"] or "")


def _state_with_head(uid: str, reserve: str) -> dict[str, Any] | None:
    """`resource_state`'s row with the head and a reserved run id (PostgreSQL), in one fixed statement."""
    qn = connection.ops.quote_name
    columns = ", ".join(f"r.{qn(Resource._meta.get_field(name).column)}" for name in (*_FIELDS, *_HEAD_FIELDS))
    revisions = qn(SpecRevision._meta.db_table)
    sql = (f"SELECT {columns}, (SELECT s.generation FROM {revisions} s WHERE s.resource_uid = r.uid "
           f"ORDER BY s.seq DESC LIMIT 1), {reserve} FROM {qn(Resource._meta.db_table)} r WHERE r.uid = %s")
    found = execute(sql, [uid])  # bound by the server: one statement PostgreSQL prepares once per connection
    if found is None:
        return None
    row = dict(zip((*_FIELDS, *_HEAD_FIELDS, "revision_generation", "next_run_id"), found, strict=True))
    for name in ("suspension", "rollback", "active_anomalies"):  # jsonb comes back as text (Django's loader)
        if isinstance(row[name], str):
            row[name] = json.loads(row[name])
    return row


def camel(name: str) -> str:
    """A rule name as a condition reason: `rollback_failed` → `RollbackFailed`."""
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_") if part) or "Anomaly"


def healing_conditions(state: RecordedState, live_conditions: list[dict[str, Any]] | None) -> tuple[Condition, ...]:
    """The conditions healing wants on the object now (see the module docstring); a condition that does not
    apply is only written (False) when the object carries it already."""
    carried = {c.get("type") for c in live_conditions or [] if isinstance(c, dict)}
    out: list[Condition] = []
    anomalies = state.active_anomalies
    if anomalies:
        rules = sorted(anomalies)
        message = "; ".join(f"{rule}: {(anomalies[rule] or {}).get('message', '')}".rstrip(": ") for rule in rules)
        out.append(Condition(ANOMALY_DETECTED, "True", camel(rules[0]), message))
    elif ANOMALY_DETECTED in carried:
        out.append(Condition(ANOMALY_DETECTED, "False", "NoAnomaly", "no anomaly rule matches"))
    rollback = state.rollback or {}
    phase = rollback.get("state")
    if phase == IN_PROGRESS:
        out.append(Condition(ROLLING_BACK, "True", "RollbackInProgress", rollback_message(rollback)))
    elif ROLLING_BACK in carried or phase == SUCCEEDED:
        reason = "RolledBack" if phase == SUCCEEDED else "NotRollingBack"
        text = (f"the spec of generation {rollback.get('to_generation')} was restored (generation "
                f"{rollback.get('generation')}) and reached a ready phase") if phase == SUCCEEDED else ""
        out.append(Condition(ROLLING_BACK, "False", reason, text))
    if phase in (FAILED, REFUSED):
        out.append(Condition(ROLLBACK_FAILED, "True", "RollbackFailed" if phase == FAILED else "RollbackRefused",
                             str(rollback.get("outcome") or rollback.get("reason") or "")))
    elif ROLLBACK_FAILED in carried:
        out.append(Condition(ROLLBACK_FAILED, "False", "Recovered", "a later generation reached a ready phase"))
    return tuple(out)


def rollback_message(rollback: dict[str, Any]) -> str:
    """One line for a rollback in progress."""
    who = rollback.get("actor") or rollback.get("by") or "?"  # the rollback's actor, as on its transitions
    why = f": {rollback['reason']}" if rollback.get("reason") else ""
    return (f"rolling back from generation {rollback.get('from_generation')} to the spec of generation "
            f"{rollback.get('to_generation')} (now generation {rollback.get('generation')}), by {who}{why}")


def healing_view(state: RecordedState | None, live: dict[str, Any]) -> HealingView | None:
    """What the reconcile step needs from the healing state (None: nothing to say)."""
    if state is None:
        return None
    conditions = healing_conditions(state, (live.get("status") or {}).get("conditions"))
    rollback = state.rollback or {}
    if rollback.get("state") == IN_PROGRESS:
        return HealingView(str(rollback.get("actor") or ""), int(rollback.get("generation") or 0),
                           rollback_message(rollback), conditions)
    if not conditions:
        return None
    return HealingView(conditions=conditions)


def moment(value: Any) -> datetime | None:
    """A time the healing state holds (an ISO 8601 string: a deadline, a start, a suspension's end), or None when
    it holds none or one that does not parse."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
