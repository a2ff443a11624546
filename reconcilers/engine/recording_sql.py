"""The recording's one-statement writes (PostgreSQL): a reconcile run guarded by a compare-and-swap on the chain
head, and the controller's mirror batch as one upsert.

**A run.** `recording.reconcile_record` locks the object's `Resource` row, reads, inserts and updates in one
transaction: about seven round trips and the ORM's query building for each. Most runs need none of what makes
that necessary. Before its reconcile the runner reads the phase on record with the chain head (`ChainHead`: the
transition and revision counts, the head's hash, the generation of the last spec revision) and reserves its
run's id from the run table's sequence, in the same query (`healing.state.resource_state(uid, head=True)`).
With those, the rows of the run are built and hashed here exactly as the locked path builds them
(`recording.run_row`, `recording.transitions_planned`, `recording.revision_row`), and written by one statement:

    WITH head AS (UPDATE resource SET <mirror, phase, chain head> WHERE id = … AND <head as read> RETURNING id),
         i0 AS (INSERT INTO specrevision … SELECT … FROM head RETURNING id),   -- the first spec revision, if due
         i1 AS (INSERT INTO reconcilerun … SELECT … FROM head RETURNING id),
         i2 AS (INSERT INTO transition … SELECT … FROM head RETURNING id), …   -- one per planned transition
    SELECT the ids

If anything moved the head since the read (another link, a phase, a rollback started, the row marked deleted),
the UPDATE matches no row, every INSERT selects from an empty `head` and writes nothing, and the caller records
through the locked path, which reads afresh. The row lock the UPDATE takes and PostgreSQL's re-check of its
WHERE after a concurrent update make the swap atomic. The mirror's columns are only overwritten when the
observed resourceVersion is not older than the row's (numeric versions compared in SQL, as `_is_newer` does).

Only the locked path records: SQLite (`next_run_id` is None), a run that handled a manual request, a phase
another field manager wrote, a rollback on record, a refused change (anomaly), a deleted object, a new spec
generation after the first revision (its diff needs the previous spec). `audit_verify` sees the same rows either
way; tests/reconcilers/engine/test_recording_sql.py holds the two paths to that.

**Rows appended in batches** (`insert_rows`: the Events archive's) are one INSERT from one JSON parameter too,
and a batch's lookups by key (`pairs_by_key`: the archive's) one SELECT with the keys as one array parameter.

**The mirror batch** (`mirror_upsert`): `INSERT … SELECT … FROM jsonb_populate_recordset(<the rows>) ON CONFLICT
(uid) DO UPDATE SET <the mirror's columns> WHERE <the incoming resourceVersion is strictly newer>`, rows in uid
order (two writers lock in the same order: no deadlock). An echo (a version the mirror has) changes nothing and
costs no lock wait in Python: one statement in autocommit instead of a transaction with a locking read, creates
and an update.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Max
from django.utils import timezone
from psycopg.types.json import Jsonb

from reconcilers.core.statemachine import StateMachine
from reconcilers.engine import jsonfast, recording
from reconcilers.engine.recording import ObservedObject, PhaseChange, RecordOutcome, RunRecord
from reconcilers.engine.step import OutOfBand, plan_transitions
from reconcilers.models import ReconcileRun, Resource


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


def reconcile_record_one_statement(
    run: RunRecord, obj: ObservedObject, change: PhaseChange | None, machine: StateMachine, head: ChainHead, *,
    live: dict[str, Any] | None = None, out_of_band: OutOfBand | None = None,
    moves: list[tuple[str, str, float | None]],
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
    shadow = Resource(id=head.id, uid=obj.uid, kind=head.kind, namespace=head.namespace, name=head.name,
                      phase=head.phase, phase_since=head.phase_since, last_transition_seq=head.last_transition_seq,
                      last_transition_hash=head.last_transition_hash, last_revision_seq=head.last_revision_seq,
                      generation=obj.generation, resource_version=obj.resource_version)
    revision = recording.revision_row(shadow, live or {}, now, {}) if revision_due else None
    if revision is not None:
        recording.head_moved(shadow, revision)
    run_row = recording.run_row(run, shadow, run_id=head.next_run_id)
    pending_moves: list[tuple[str, str, float | None]] = []  # counted once the statement has written them
    transitions = recording.transitions_planned(shadow, planned, change, run_row, obj, now, pending_moves) \
        if change is not None else []
    # the row as the locked path leaves it: what was observed, the run's result, the change's reason
    recording.mirror_observed(shadow, obj, now)
    shadow.last_reconcile_at, shadow.last_result, shadow.updated_at = now, run.result, now
    if change is not None:
        shadow.reason, shadow.message = change.reason[:255], change.message

    sql, params = _statement(shadow, head, obj, change is not None,
                             [r for r in (revision, run_row, *transitions) if r is not None])
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
    return RecordOutcome(run_row.id, [t.id for t in transitions], None, head.phase, shadow.phase, transitions,
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
_MIRROR = [name for name in recording.MIRROR_FIELDS if name != "updated_at"]
#: the columns every recorded run sets, and those a run with a phase change sets too
_DIRECT = ["phase", "phase_since", "last_transition_seq", "last_transition_hash", "last_revision_seq",
           "last_reconcile_at", "last_result", "updated_at"]
_CHANGE = ["reason", "message"]


def execute(sql: str, params: list[Any], *, fetch_all: bool = False) -> Any:
    """Run one statement with its parameters bound by the server (a plain psycopg cursor): Django's cursors quote
    every value into the SQL text on the client, which for a batch's JSON cost more than the rest of the write.
    Wrapped as Django wraps its own cursors (errors translated, queries counted and logged). The connection
    prepares a statement after `OPSCONSOLE_DB_PREPARE_THRESHOLD` executions (settings: the statements here are fixed
    texts, so PostgreSQL parses and plans each once per connection). Returns the first row (`fetch_all`: every
    row), if the statement returns rows."""
    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    cursor = connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
    with cursor:
        cursor.execute(sql, params)
        if raw.description is None:
            return None
        return cursor.fetchall() if fetch_all else cursor.fetchone()


def pairs_by_key(model: type[models.Model], key: str, value: str, keys: Collection[str], *,
                 greatest: bool = False) -> dict[Any, Any]:
    """{key: value} of `model`'s rows whose field `key` is one of `keys` (`greatest`: the largest `value` per key).
    On PostgreSQL one statement whose keys are one array parameter (`= ANY(%s)`), bound by the server: the ORM's
    `IN (%s, …)` of a batch's hundreds of keys is a query psycopg parses again on the client on every execute.
    Elsewhere the ORM's query."""
    if not keys:
        return {}
    if connection.vendor != "postgresql":
        rows = model._default_manager.filter(**{f"{key}__in": list(keys)})
        if greatest:
            return dict(rows.values(key).annotate(top=Max(value)).values_list(key, "top"))
        return dict(rows.values_list(key, value))
    qn = connection.ops.quote_name
    k, v = qn(model._meta.get_field(key).column), qn(model._meta.get_field(value).column)
    selected = f"{k}, MAX({v})" if greatest else f"{k}, {v}"
    grouped = f" GROUP BY {k}" if greatest else ""
    return dict(execute(f"SELECT {selected} FROM {_table(model)} WHERE {k} = ANY(%s){grouped}", [list(keys)],
                         fetch_all=True))


def _jsonb(value: Any) -> Jsonb:
    """`value` as a jsonb parameter, encoded by `jsonfast` (a run's rows are most of what the record encodes)."""
    return Jsonb(value, dumps=jsonfast.dumps)


def _json_value(field: models.Field, value: Any) -> Any:
    """A column's value as JSON that `jsonb_populate_record` reads back into that column unchanged."""
    if value is None or isinstance(field, models.JSONField):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # a uuid


def _json_row(row: models.Model, names: list[str] | None = None) -> dict[str, Any]:
    """`row`'s columns (all concrete fields but an unset primary key, or `names`) as {column: JSON value}, each
    prepared as `Model.save` prepares it."""
    out = {}
    for f, column, attname, prepare, optional in _row_plan(type(row), tuple(names) if names is not None else None):
        value = f.pre_save(row, True) if prepare else getattr(row, attname)
        if value is None and optional:
            continue  # an unset primary key: the table's sequence gives it
        out[column] = _json_value(f, value)
    return out


@functools.cache
def _row_plan(model: type[models.Model], names: tuple[str, ...] | None,
              ) -> tuple[tuple[models.Field, str, str, bool, bool], ...]:
    """The fields `_json_row` writes for `model` (`names`, or every concrete field), each with its column, its
    attribute, whether `pre_save` prepares its value (auto_now and the like; else it is the attribute as it
    stands) and whether it is left out when unset (the primary key of a row of every field). Found once per
    model and names, not for every row."""
    opts = model._meta
    fields = [opts.get_field(name) for name in names] if names is not None else list(opts.concrete_fields)
    return tuple((f, f.column, f.attname, _prepared(f), f.primary_key and names is None) for f in fields)


def _prepared(field: models.Field) -> bool:
    """Whether `pre_save` (as for an insert) may give another value than the attribute: a date with auto_now or
    auto_now_add, or a field that overrides it."""
    if isinstance(field, models.DateField):
        return bool(field.auto_now or field.auto_now_add)
    return type(field).pre_save is not models.Field.pre_save


def _table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _statement(shadow: Resource, head: ChainHead, obj: ObservedObject, changed: bool,
               rows: list[models.Model]) -> tuple[str, list[Any]]:
    """The statement writing `shadow` (the row as the run leaves it) over the row whose head is `head`, then
    inserting `rows`, and its parameters. Its text depends only on which rows it inserts (a handful of shapes, so
    psycopg's query cache keeps them): every value travels as one JSON parameter per row."""
    direct = _json_row(shadow, [*_DIRECT, *_CHANGE] if changed else _DIRECT)
    mirror = _json_row(shadow, _MIRROR)
    sql, params = _update_sql(), [head.id, head.last_transition_seq, head.last_transition_hash,
                                         head.last_revision_seq, head.phase]
    incoming = int(obj.resource_version) if obj.resource_version.isdigit() else None
    params = [incoming, _jsonb(direct), _jsonb({**mirror, **direct}), *params]
    parts = [sql]
    for i, row in enumerate(rows):
        parts.append(f"i{i} AS ({_insert_sql(type(row), with_id=row.pk is not None)})")
        params.append(_jsonb(_json_row(row)))
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
    return (f"head AS (UPDATE {_table(Resource)} AS r SET ({cols}) = (SELECT {values} "
            f"FROM jsonb_populate_record(r, CASE WHEN {older} THEN %s::jsonb ELSE %s::jsonb END) AS x) "
            f"WHERE r.id = %s AND r.last_transition_seq = %s AND r.last_transition_hash = %s "
            f"AND r.last_revision_seq = %s AND r.phase = %s AND r.rollback IS NULL AND NOT r.deleted RETURNING r.id)")


@functools.cache
def _insert_sql(model: type[models.Model], *, with_id: bool) -> str:
    """`INSERT INTO <table> SELECT x.* FROM head, jsonb_populate_record(NULL::<table>, <the row's JSON>) AS x`:
    nothing when `head` is empty; the id from the JSON (a reserved run id) or from the table's sequence."""
    table = _table(model)
    row = "%s::jsonb" if with_id else (f"%s::jsonb || jsonb_build_object('id', "
                                       f"nextval(pg_get_serial_sequence('{model._meta.db_table}', 'id')))")
    return f"INSERT INTO {table} SELECT x.* FROM head, jsonb_populate_record(NULL::{table}, {row}) AS x RETURNING id"


def mirror_upsert(objects: dict[str, ObservedObject], now: datetime) -> None:
    """Create or refresh the mirror rows of these objects (by uid) in one statement (see the module docstring)."""
    if not objects:
        return
    rows = []
    for uid in sorted(objects):
        o = objects[uid]
        row = recording.new_resource(o.kind, uid, o.namespace, o.name)
        recording.mirror_observed(row, o, now)
        row.deleted, row.deleted_at = False, None  # the mirror batch never marks deleted (see resource_mirror_write)
        row.created_at = row.updated_at = now
        rows.append(_json_row(row))
    execute(_upsert_sql(), [_jsonb(rows)])


@functools.cache
def _upsert_sql() -> str:
    qn = connection.ops.quote_name
    meta = Resource._meta
    columns = ", ".join(qn(f.column) for f in meta.concrete_fields if not f.primary_key)
    rv = qn(meta.get_field("resource_version").column)
    sets = ", ".join(f"{qn(meta.get_field(name).column)} = EXCLUDED.{qn(meta.get_field(name).column)}"
                     for name in recording.MIRROR_FIELDS)
    newer = (f"r.{rv} = '' OR r.{rv} !~ '^[0-9]{{1,30}}$' OR EXCLUDED.{rv} !~ '^[0-9]{{1,30}}$' "
             f"OR EXCLUDED.{rv}::numeric > r.{rv}::numeric")
    return (f"INSERT INTO {_table(Resource)} AS r ({columns}) SELECT {columns} "
            f"FROM jsonb_populate_recordset(NULL::{_table(Resource)}, %s::jsonb) ORDER BY {qn('uid')} "
            f"ON CONFLICT ({qn('uid')}) DO UPDATE SET {sets} WHERE {newer}")


def insert_rows(rows: Sequence[models.Model]) -> None:
    """INSERT these unsaved rows of one model in one statement, a row that conflicts with one on record skipped:
    `bulk_create(ignore_conflicts=True)`, on PostgreSQL with its values as one JSON parameter instead of a quoted
    literal each."""
    if not rows:
        return
    model = type(rows[0])
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(rows, ignore_conflicts=True)
        return
    columns = ", ".join(connection.ops.quote_name(f.column) for f in model._meta.concrete_fields if not f.primary_key)
    execute(f"INSERT INTO {_table(model)} ({columns}) SELECT {columns} "
             f"FROM jsonb_populate_recordset(NULL::{_table(model)}, %s::jsonb) ON CONFLICT DO NOTHING",
             [_jsonb([_json_row(row) for row in rows])])
