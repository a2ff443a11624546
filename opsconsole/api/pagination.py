"""Cursor pagination on the primary key: a stable order whose pages cost the same at any depth (an indexed
`WHERE id > …`), with opaque `next`/`previous` links and a bounded `page_size`."""

from __future__ import annotations

from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    """Oldest first by id (resources, kinds' rows, runs)."""

    ordering = "id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class NewestFirstPagination(IdCursorPagination):
    """Newest first by id (the transitions feed, reconcile runs, the action record)."""

    ordering = "-id"
