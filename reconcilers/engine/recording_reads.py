"""What a run reads of the record before its reconcile, for the one-statement record: the chain head.

The runner reads the phase on record with the healing state (`healing.state.resource_state`); with `head=True`
the same query returns the chain head (`ChainHead`: the transition and revision counts, the head's hash, the
generation of the newest spec revision) and reserves the run's id from the run table's sequence
(`reserve_run_id_sql`). `recording_sql.reconcile_record_one_statement` swaps against that head.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from reconcilers.models import ReconcileRun


@dataclass(frozen=True)
class ChainHead:
    """A resource's chain head as read before a run, and the id reserved for that run's row (None: not
    PostgreSQL, the one-statement path is off)."""

    id: int
    kind: str
    namespace: str
    name: str
    phase: str
    phase_since: datetime | None
    last_transition_seq: int
    last_transition_hash: str
    last_revision_seq: int
    revision_generation: int | None  # the generation of the newest spec revision (None: none yet)
    rollback_none: bool  # no rollback on record (SQL NULL)
    deleted: bool
    next_run_id: int | None


def reserve_run_id_sql() -> str | None:
    """SQL giving a fresh id from the run table's sequence (PostgreSQL), or None elsewhere."""
    if connection.vendor != "postgresql":
        return None
    return f"nextval(pg_get_serial_sequence('{ReconcileRun._meta.db_table}', 'id'))"
