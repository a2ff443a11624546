"""Statements bound by the server and rows as JSON (PostgreSQL): what the one-statement writes are made of.

`execute` runs one statement with its parameters bound by PostgreSQL (Django's cursors quote every value into the
text on the client); `json_row` turns a model row into the {column: JSON value} that `jsonb_populate_record`
reads back unchanged, and `jsonb` makes it one parameter. Built on them: rows appended in batches (`insert_rows`:
the Events archive's) as one INSERT from one JSON parameter, and a batch's look-ups by key (`pairs_by_key`) as one
SELECT with the keys as one array parameter. The one-statement record (`recording_sql`) and the mirror batch
(`recording_mirror.mirror_upsert`) use the same pieces.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import psycopg
from django.db import connection, models
from django.db.models import Max
from psycopg.types.json import Jsonb

from reconcilers.engine import jsonfast


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
    return dict(execute(f"SELECT {selected} FROM {table(model)} WHERE {k} = ANY(%s){grouped}", [list(keys)],
                        fetch_all=True))


def jsonb(value: Any) -> Jsonb:
    """`value` as a jsonb parameter, encoded by `jsonfast` (a run's rows are most of what the record encodes)."""
    return Jsonb(value, dumps=jsonfast.dumps)


def json_value(field: models.Field, value: Any) -> Any:
    """A column's value as JSON that `jsonb_populate_record` reads back into that column unchanged."""
    if value is None or isinstance(field, models.JSONField):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # a uuid


def json_row(row: models.Model, names: list[str] | None = None) -> dict[str, Any]:
    """`row`'s columns (all concrete fields but an unset primary key, or `names`) as {column: JSON value}, each
    prepared as `Model.save` prepares it."""
    out = {}
    for f, column, attname, prepare, optional in _row_plan(type(row), tuple(names) if names is not None else None):
        value = f.pre_save(row, True) if prepare else getattr(row, attname)
        if value is None and optional:
            continue  # an unset primary key: the table's sequence gives it
        out[column] = json_value(f, value)
    return out


@functools.cache
def _row_plan(model: type[models.Model], names: tuple[str, ...] | None,
              ) -> tuple[tuple[models.Field, str, str, bool, bool], ...]:
    """The fields `json_row` writes for `model` (`names`, or every concrete field), each with its column, its
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


def table(model: type[models.Model]) -> str:
    """`model`'s table name, quoted for SQL."""
    return connection.ops.quote_name(model._meta.db_table)


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
    execute(f"INSERT INTO {table(model)} ({columns}) SELECT {columns} "
            f"FROM jsonb_populate_recordset(NULL::{table(model)}, %s::jsonb) ON CONFLICT DO NOTHING",
            [jsonb([json_row(row) for row in rows])])
