"""The one-statement record (PostgreSQL): a reconcile run written by one statement, guarded by a compare-and-swap
on the chain head.

`recording.reconcile_record` locks the object's `Resource` row, reads, inserts and updates in one
transaction: about seven round trips and the ORM's query building for each. Most runs need none of what makes
that necessary. Before its reconcile the runner reads the phase on record with the chain head (`ChainHead`: the
transition and revision counts, the head's hash, the generation of the last spec revision) and reserves its
run's id from the run table's sequence, in the same query (`healing.state.resource_state(uid, head=True)`;
`recording_reads`). With those, the rows of the run are built and hashed here exactly as the locked path builds
them (`recording_rows`: `run_row`, `transitions_planned`, `revision_row`), and written by one statement:

    WITH head AS (UPDATE resource SET <mirror, phase, chain head> WHERE id = … AND <head as read> RETURNING id),
         i0 AS (INSERT INTO specrevision … SELECT … FROM head RETURNING id),   -- the first spec revision, if due
         i1 AS (INSERT INTO reconcilerun … SELECT … FROM head RETURNING id),
         i2 AS (INSERT INTO transition … SELECT … FROM head RETURNING id), …   -- one per planned transition
    SELECT the ids

If anything moved the head since the read (another link, a phase, a rollback started, the row marked deleted),
the UPDATE matches no row, every INSERT selects from an empty `head` and writes nothing, and the caller records
through the locked path, which reads afresh. The row lock the UPDATE takes and PostgreSQL's re-check of its
WHERE after a concurrent update make the swap atomic. The mirror's columns are only overwritten when the
observed resourceVersion is not older than the row's (numeric versions compared in SQL, as
`recording_rows.mirror_observed` does).

Only the locked path records: SQLite (`next_run_id` is None), a run that handled a manual request, a phase
another field manager wrote, a rollback on record, a refused change (anomaly), a deleted object, a new spec
generation after the first revision (its diff needs the previous spec). `audit_verify` sees the same rows either
way; tests/reconcilers/engine/test_recording_sql.py holds the two paths to that.

The statements' pieces (server-bound `execute`, rows as JSON) are `sqljson`'s; the mirror batch's one statement
is `recording_mirror.mirror_upsert`'s.
"""

from __future__ import annotations

import functools
from contextlib import nullcontext
from typing import Any

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from reconcilers.core.statemachine import StateMachine
from reconcilers.engine.chain_link import head_moved
from reconcilers.engine.recording_reads import ChainHead, reserve_run_id_sql  # noqa: F401 - importers know them here
from reconcilers.engine.recording_rows import (
    MIRROR_FIELDS,
    Move,
    ObservedObject,
    RecordOutcome,
    RunRecord,
    mirror_observed,
    revision_row,
    run_row,
    transitions_planned,
)
from reconcilers.engine.sqljson import execute, insert_rows, json_row, jsonb, pairs_by_key, table  # noqa: F401
from reconcilers.engine.step import OutOfBand, PhaseChange, plan_transitions
from reconcilers.models import Resource


def reconcile_record_one_statement(
    run: RunRecord, obj: ObservedObject, change: PhaseChange | None, machine: StateMachine, head: ChainHead, *,
    live: dict[str, Any] | None = None, out_of_band: OutOfBand | None = None,
    moves: list[Move],
) -> RecordOutcome | None:
    """Record the run in one statement when only that is needed and the head is still as read; None when the
    locked path must record it (nothing was written). `moves` gets the committed transitions (for metrics)."""
    if (head.next_run_id is None or connection.vendor != "postgresql" or run.request_token
            or out_of_band is not None or obj.deleted or not head.rollback_none or head.deleted):
        return None
    planned, refused = plan_transitions(machine, head.phase, change) if change is not None else ([], False)
    if refused:
        return None
    revision_due = _revision_due(obj, live, head)
    if revision_due is None:
        return None
    now = timezone.now()
    shadow = Resource(id=head.id, uid=obj.uid, cluster=obj.cluster, kind=head.kind, namespace=head.namespace,
                      name=head.name,
                      phase=head.phase, phase_since=head.phase_since, last_transition_seq=head.last_transition_seq,
                      last_transition_hash=head.last_transition_hash, last_revision_seq=head.last_revision_seq,
                      generation=obj.generation, resource_version=obj.resource_version)
    revision = revision_row(shadow, live or {}, now, {}) if revision_due else None
    if revision is not None:
        head_moved(shadow, revision)
    this_run = run_row(run, shadow, run_id=head.next_run_id)
    pending_moves: list[Move] = []  # counted once the statement has written them
    transitions = transitions_planned(shadow, planned, change, this_run, obj, now, pending_moves) \
        if change is not None else []
    # the row as the locked path leaves it: what was observed, the run's result, the change's reason
    mirror_observed(shadow, obj, now)
    shadow.last_reconcile_at, shadow.last_result, shadow.updated_at = now, run.result, now
    if change is not None:
        shadow.reason, shadow.message = change.reason[:255], change.message

    sql, params = _statement(shadow, head, obj, change is not None,
                             [r for r in (revision, this_run, *transitions) if r is not None])
    try:
        # inside a caller's transaction, a savepoint keeps a refused statement from breaking it
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            ids = execute(sql, params)
    except IntegrityError:  # a writer the head does not show (a row under the same seq): the locked path decides
        return None
    if ids is None or ids[0] is None:
        return None
    inserted = list(ids[1:])
    if revision is not None:
        revision.id = inserted.pop(0)
    inserted.pop(0)  # the run: its id was reserved
    for row, row_id in zip(transitions, inserted, strict=True):
        row.id = row_id
    moves.extend(pending_moves)
    return RecordOutcome(this_run.id, [t.id for t in transitions], None, head.phase, shadow.phase, transitions,
                         revision.id if revision is not None else None)


def _revision_due(obj: ObservedObject, live: dict[str, Any] | None, head: ChainHead) -> bool | None:
    """False: no revision to record; True: the object's first one; None: a later generation's (the locked path
    reads the previous spec for its diff)."""
    if live is None:
        return False
    meta = live.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    if generation <= 0 or meta.get("uid") != obj.uid:
        return False
    if head.revision_generation is None:
        return True if head.last_revision_seq == 0 else None
    return False if generation <= head.revision_generation else None


#: the mirror's columns, overwritten only by an observation not older than the row's
_MIRROR = [name for name in MIRROR_FIELDS if name != "updated_at"]
#: the columns every recorded run sets, and those a run with a phase change sets too
_DIRECT = ["phase", "phase_since", "last_transition_seq", "last_transition_hash", "last_revision_seq",
           "last_reconcile_at", "last_result", "updated_at"]
_CHANGE = ["reason", "message"]


def _statement(shadow: Resource, head: ChainHead, obj: ObservedObject, changed: bool,
               rows: list[models.Model]) -> tuple[str, list[Any]]:
    """The statement writing `shadow` (the row as the run leaves it) over the row whose head is `head`, then
    inserting `rows`, and its parameters. Its text depends only on which rows it inserts (a handful of shapes, so
    psycopg's query cache keeps them): every value travels as one JSON parameter per row."""
    direct = json_row(shadow, [*_DIRECT, *_CHANGE] if changed else _DIRECT)
    mirror = json_row(shadow, _MIRROR)
    sql, params = _update_sql(), [head.id, head.last_transition_seq, head.last_transition_hash,
                                         head.last_revision_seq, head.phase]
    incoming = int(obj.resource_version) if obj.resource_version.isdigit() else None
    params = [incoming, jsonb(direct), jsonb({**mirror, **direct}), *params]
    parts = [sql]
    for i, row in enumerate(rows):
        parts.append(f"i{i} AS ({_insert_sql(type(row), with_id=row.pk is not None)})")
        params.append(jsonb(json_row(row)))
    ids = ", ".join(f"(SELECT id FROM i{i})" for i in range(len(rows)))
    return f"WITH {', '.join(parts)} SELECT (SELECT id FROM head), {ids}", params


@functools.cache
def _update_sql() -> str:
    """The statement's `head` part: the row's update (a column the JSON leaves out keeps its value)."""
    qn = connection.ops.quote_name
    columns = [Resource._meta.get_field(name).column for name in (*_MIRROR, *_DIRECT, *_CHANGE)]
    rv = qn(Resource._meta.get_field("resource_version").column)
    older = f"CASE WHEN r.{rv} ~ '^[0-9]{{1,30}}$' THEN r.{rv}::numeric > %s::numeric ELSE false END"
    cols, values = ", ".join(qn(c) for c in columns), ", ".join(f"x.{qn(c)}" for c in columns)
    return (f"head AS (UPDATE {table(Resource)} AS r SET ({cols}) = (SELECT {values} "
            f"FROM jsonb_populate_record(r, CASE WHEN {older} THEN %s::jsonb ELSE %s::jsonb END) AS x) "
            f"WHERE r.id = %s AND r.last_transition_seq = %s AND r.last_transition_hash = %s "
            f"AND r.last_revision_seq = %s AND r.phase = %s AND r.rollback IS NULL AND NOT r.deleted RETURNING r.id)")


@functools.cache
def _insert_sql(model: type[models.Model], *, with_id: bool) -> str:
    """`INSERT INTO <table> SELECT x.* FROM head, jsonb_populate_record(NULL::<table>, <the row's JSON>) AS x`:
    nothing when `head` is empty; the id from the JSON (a reserved run id) or from the table's sequence."""
    name = table(model)
    row = "%s::jsonb" if with_id else (f"%s::jsonb || jsonb_build_object('id', "
                                       f"nextval(pg_get_serial_sequence('{model._meta.db_table}', 'id')))")
    return f"INSERT INTO {name} SELECT x.* FROM head, jsonb_populate_record(NULL::{name}, {row}) AS x RETURNING id"
