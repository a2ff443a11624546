"""Keyset (cursor) pagination for the console's tables: the page after a row is `WHERE (sort, id) > (v, id)`
in the chosen order, so every page costs the same at any depth (no OFFSET). The cursor is an opaque,
URL-safe token of the last row's sort value and id; a bad cursor starts from the first page.

The condition is a row comparison, which PostgreSQL takes as the start of an index range scan on
(sort, id) (the Resource mirror has one per sort but `last`, see its indexes): written out as `sort > v OR (sort = v
AND id > pk)` it would be a filter, and a page deep in a column of few values (kind, phase) would read every row
before it."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import DateTimeField, F, QuerySet, Value
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan
from django.db.models.functions import Coalesce

from reconcilers.models.resource import PHASE_SINCE_UNSET

EPOCH = PHASE_SINCE_UNSET  # the mirror's index on the "since" sort is on this very expression
#: sort name → (column or expression, is a datetime)
SORTS: dict[str, tuple[Any, bool]] = {
    "name": (F("name"), False),
    "namespace": (F("namespace"), False),
    "kind": (F("kind"), False),
    "phase": (F("phase"), False),
    "since": (Coalesce("phase_since", Value(EPOCH, output_field=DateTimeField())), True),
    "last": (Coalesce("last_reconcile_at", Value(EPOCH, output_field=DateTimeField())), True),
    "id": (F("id"), False),
}


@dataclass
class Page:
    """One page of rows, the cursor of the next one ('' at the end)."""

    rows: list[Any]
    next_cursor: str
    sort: str
    descending: bool


def encode(value: Any, pk: int) -> str:
    """The cursor after a row."""
    raw = json.dumps([value.isoformat() if isinstance(value, datetime) else value, pk])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str, is_time: bool) -> tuple[Any, int] | None:
    """(value, id) of a cursor, or None when it is not one."""
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if isinstance(value, str) and "\x00" in value:  # not one we made; the database cannot compare it
            return None
        if is_time:
            value = datetime.fromisoformat(value)
        return value, int(pk)
    except (ValueError, TypeError):
        return None


def keyset_page(qs: QuerySet, sort: str, *, cursor: str = "", size: int = 50) -> Page:
    """The page of `qs` after `cursor` ordered by `sort` ('-name' for descending; unknown → 'name')."""
    descending = sort.startswith("-")
    name = sort.lstrip("-")
    if name not in SORTS:
        name, descending = "name", False
    expr, is_time = SORTS[name]
    qs = qs.annotate(_sort=expr)
    after = decode(cursor, is_time) if cursor else None
    if after is not None:
        value, pk = after
        compare = TupleLessThan if descending else TupleGreaterThan
        qs = qs.filter(compare(Tuple(expr, F("id")), (value, pk)))
    order = ("-_sort", "-id") if descending else ("_sort", "id")
    rows = list(qs.order_by(*order)[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    nxt = encode(rows[-1]._sort, rows[-1].pk) if more and rows else ""
    return Page(rows, nxt, ("-" if descending else "") + name, descending)
