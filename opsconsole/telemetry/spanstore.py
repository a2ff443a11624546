"""A span processor that keeps finished spans in the database, so the console can draw a trace waterfall
without any tracing server.

It is bounded and never blocks the code being traced: spans go into a fixed-size in-memory queue, a daemon
thread writes them in batches, and when the queue is full the span is dropped and counted
(`opsconsole_spans_dropped_total`). Old spans are deleted after the retention period. Shutdown waits at
most a short timeout.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from prometheus_client import Counter

log = logging.getLogger(__name__)

SPANS_DROPPED = Counter("opsconsole_spans_dropped_total", "Spans not stored because the span queue was full")
SPANS_STORED = Counter("opsconsole_spans_stored_total", "Spans written to the database span store")


def _ts(ns: int | None) -> datetime:
    return datetime.fromtimestamp((ns or 0) / 1e9, tz=UTC)


def span_row(span: ReadableSpan) -> dict[str, object]:
    """The Span model fields of one finished span."""
    ctx = span.get_span_context()
    parent = span.parent
    service = str(span.resource.attributes.get("service.name", "")) if span.resource else ""
    duration_ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
    return {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent else "",
        "name": span.name[:255],
        "service": service[:255],
        "kind": span.kind.name.lower(),
        "start_time": _ts(span.start_time),
        "end_time": _ts(span.end_time),
        "duration_ms": duration_ms,
        "status_code": span.status.status_code.name.lower(),
        "status_message": span.status.description or "",
        "attributes": {
            k: v if isinstance(v, str | int | float | bool) else list(v) for k, v in (span.attributes or {}).items()
        },
        "events": [
            {"name": e.name, "time": _ts(e.timestamp).isoformat(), "attributes": dict(e.attributes or {})}
            for e in span.events
        ],
    }


def spans_insert(rows: list[dict[str, object]]) -> None:
    """Insert Span rows: on PostgreSQL with one `COPY` (a fraction of the CPU an INSERT of the batch costs the
    worker and the server), elsewhere, or when the COPY meets a span already stored, with `bulk_create`
    skipping the ones already there."""
    from django.db import DatabaseError, connection, transaction

    from reconcilers.models import Span as SpanRow

    if connection.vendor == "postgresql":
        try:
            with transaction.atomic():
                _spans_copy(connection, rows)
            return
        except DatabaseError:
            log.debug("COPY of %d spans failed; inserting them one batch at a time", len(rows), exc_info=True)
    SpanRow.objects.bulk_create([SpanRow(**row) for row in rows], ignore_conflicts=True)


def _spans_copy(connection: Any, rows: list[dict[str, object]]) -> None:
    from reconcilers.models import Span as SpanRow

    fields = [f for f in SpanRow._meta.concrete_fields if not f.primary_key]
    qn = connection.ops.quote_name
    sql = f"COPY {qn(SpanRow._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) FROM STDIN"
    json_fields = {f.attname for f in fields if f.get_internal_type() == "JSONField"}
    with connection.cursor() as cursor, connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row([json.dumps(row[f.attname]) if f.attname in json_fields else row[f.attname]
                            for f in fields])


class DatabaseSpanProcessor(SpanProcessor):
    """Bounded, batching, non-blocking span processor writing to the `Span` table."""

    def __init__(
        self,
        *,
        max_queue: int = 4096,
        batch_size: int = 256,
        interval: float = 0.5,
        retention: timedelta = timedelta(days=7),
        prune_every: float = 600.0,
    ) -> None:
        self._queue: queue.Queue[ReadableSpan] = queue.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._interval = interval
        self._retention = retention
        self._prune_every = prune_every
        self._last_prune = time.monotonic()  # the first prune comes one period after start
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._flushed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="opsconsole-spanstore", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue the finished span; drop and count it when the queue is full."""
        if not span.context or not span.context.trace_flags.sampled:
            return
        try:
            self._queue.put_nowait(span)
        except queue.Full:
            SPANS_DROPPED.inc()

    def _drain(self) -> list[ReadableSpan]:
        batch: list[ReadableSpan] = []
        while len(batch) < self._batch_size:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def write_pending(self) -> int:
        """One step: write everything queued now, in batches; returns how many spans were stored."""

        stored = 0
        while batch := self._drain():
            try:
                spans_insert([span_row(s) for s in batch])
                stored += len(batch)
                SPANS_STORED.inc(len(batch))
            except Exception:  # the span store must never take the traced code down
                log.exception("could not store %d spans", len(batch))
                SPANS_DROPPED.inc(len(batch))
            finally:
                for _ in batch:
                    self._queue.task_done()
        now = time.monotonic()
        if now - self._last_prune > self._prune_every:
            self._last_prune = now
            self.prune()
        return stored

    def prune(self) -> int:
        """Delete spans older than the retention period; returns how many."""
        from reconcilers.models import Span as SpanRow

        try:
            deleted, _ = SpanRow.objects.filter(start_time__lt=datetime.now(UTC) - self._retention).delete()
            return deleted
        except Exception:
            log.exception("could not prune old spans")
            return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            self.write_pending()
            with self._flushed:
                self._flushed.notify_all()
        self._close_db()

    @staticmethod
    def _close_db() -> None:
        try:
            from django.db import connection

            connection.close()
        except Exception:  # noqa: S110 - closing on the way out
            pass

    def force_flush(self, timeout_millis: int = 5000) -> bool:
        """Wait until what is queued now has been written, at most timeout_millis."""
        deadline = time.monotonic() + timeout_millis / 1000
        while self._queue.unfinished_tasks and time.monotonic() < deadline and self._thread.is_alive():
            with self._flushed:
                self._wake.set()
                self._flushed.wait(min(self._interval, max(0.0, deadline - time.monotonic())))
        return not self._queue.unfinished_tasks

    def shutdown(self) -> None:
        """Stop the writer after one last write; never waits more than a few seconds."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=3)
