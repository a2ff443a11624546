"""Helpers shared by the models, audit and recording tests: a kind, its machine, observed objects, tampering."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connection

from reconcilers.core.reconciler import ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.engine.recording import (
    ObservedObject,
    PhaseChange,
    RecordOutcome,
    RunRecord,
    reconcile_record,
)
from reconcilers.models import Transition

KIND = ResourceKind("cache.example.com", "v1alpha1", "memcacheds", "Memcached")
MACHINE = StateMachine.build(
    "memcached",
    states=["Pending", "Running", "Degraded", "Failed", "Terminating", "Deleted"],
    initial="Pending",
    transitions={
        "Pending": ["Running", "Failed", "Terminating"],
        "Running": ["Degraded", "Pending", "Failed", "Terminating"],
        "Degraded": ["Running", "Pending", "Failed", "Terminating"],
        "Failed": ["Pending", "Terminating"],
        "Terminating": ["Deleted"],
    },
    terminal=["Deleted"],
)
_rv = itertools.count(100)


def observed(uid: str = "uid-1", *, name: str | None = None, namespace: str = "default", **overrides: Any):
    """An ObservedObject of KIND; each call gets a higher resourceVersion unless one is given."""
    fields: dict[str, Any] = dict(
        kind=KIND,
        uid=uid,
        namespace=namespace,
        name=name or f"m-{uid}",
        generation=1,
        observed_generation=1,
        resource_version=str(next(_rv)),
        labels={"app": "memcached"},
        owner=None,
        spec={"size": 3},
        status={},
        conditions=[],
    )
    fields.update(overrides)
    return ObservedObject(**fields)


def run_for(obj: ObservedObject, **overrides: Any) -> RunRecord:
    """A successful RunRecord for obj's key."""
    fields: dict[str, Any] = dict(
        key=obj.kind.request(obj.namespace, obj.name).key(),
        kind=obj.kind.kind,
        started_at=datetime.now(UTC),
        duration_seconds=0.01,
        result="success",
        worker="test-worker",
        trace_id="ab" * 16,
    )
    fields.update(overrides)
    return RunRecord(**fields)


def record(
    obj: ObservedObject, to_phase: str | None, *, reason: str = "Reconciled", message: str = "", **run: Any
) -> RecordOutcome:
    """reconcile_record with a change to `to_phase` (None: no change)."""
    change = PhaseChange(to_phase, reason, message or f"now {to_phase}") if to_phase else None
    return reconcile_record(run_for(obj, **run), obj, change, MACHINE)


def record_phases(uid: str, phases: Iterable[str]) -> list[Transition]:
    """Record one reconcile per phase for `uid`; return the resource's transitions in seq order."""
    for phase in phases:
        record(observed(uid), phase)
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq"))


def tamper(statements: Sequence[str | tuple[str, Sequence[Any]]]) -> None:
    """Run SQL behind the ORM's back, as a DBA could: on PostgreSQL with the append-only triggers disabled
    (ALTER TABLE ... DISABLE TRIGGER ALL) for the duration, then enabled again."""
    tables = ("reconcilers_transition", "reconcilers_reconcilerun", "reconcilers_healingrecord",
              "reconcilers_specrevision", "accounts_actionrecord")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE needs no pending (deferred) FK checks
            for table in tables:
                cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        try:
            for statement in statements:
                sql, params = (statement, ()) if isinstance(statement, str) else statement
                cursor.execute(sql, params)
        finally:
            if connection.vendor == "postgresql":
                for table in tables:
                    cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def swap_seq(a: Transition, b: Transition) -> None:
    """Swap two rows' seq numbers (a reordering) through raw SQL."""
    sql = "UPDATE reconcilers_transition SET seq = %s WHERE id = %s"
    tamper([(sql, (100000, a.id)), (sql, (a.seq, b.id)), (sql, (b.seq, a.id))])


def swap_ids(a: Transition, b: Transition) -> None:
    """Swap two rows' primary keys (their storage order) through raw SQL."""
    sql = "UPDATE reconcilers_transition SET id = %s WHERE id = %s"
    tamper([(sql, (-a.id, a.id)), (sql, (a.id, b.id)), (sql, (b.id, -a.id))])


def delete_row(row: Transition) -> None:
    """Delete one transition through raw SQL."""
    tamper([("DELETE FROM reconcilers_transition WHERE id = %s", (row.id,))])


def edit_row(row: Transition, column: str, value: Any) -> None:
    """Change one column of one transition through raw SQL (its hash left as it was)."""
    tamper([(f"UPDATE reconcilers_transition SET {column} = %s WHERE id = %s", (value, row.id))])
