"""Retention: the one sanctioned way to delete old ReconcileRun, Span and KubeEvent rows. Transition rows (and
healing records, links of the same chains) are never deleted.

`ReconcileRun` is append-only (the ORM refuses deletes; on PostgreSQL a trigger refuses them too). Retention
deletes in batches, each in its own transaction that says `SET LOCAL opsconsole.retention = 'on'` on
PostgreSQL, the one thing the trigger lets through (migration 0003), for DELETE on runs only. A run is kept,
however old, while anything of the record points at it: a Transition, an Anomaly or a ReconcileRequest (so a
transition's run and trace stay explorable forever). The guard is in the DELETE's own WHERE clause, and the
foreign keys (PROTECT, enforced by the database at commit) would refuse the rest anyway.

The Kubernetes Events archive (`KubeEvent`, append-only the same way, migration 0009) is pruned by the time the
controller archived each row (`observed_at`), in batches under the same `SET LOCAL`; nothing references its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from reconcilers.models import Anomaly, KubeEvent, ReconcileRequest, ReconcileRun, Span, Transition

DEFAULT_BATCH = 1000


@dataclass
class RetentionReport:
    """What one retention pass deleted (or would delete, in a dry run)."""

    runs_deleted: int = 0
    runs_kept_referenced: int = 0
    spans_deleted: int = 0
    events_deleted: int = 0


def _run_delete_sql() -> str:
    run = ReconcileRun._meta.db_table
    refs = [
        (Transition._meta.db_table, Transition._meta.get_field("run").column),
        (Anomaly._meta.db_table, Anomaly._meta.get_field("run").column),
        (ReconcileRequest._meta.db_table, ReconcileRequest._meta.get_field("run").column),
    ]
    unreferenced = " ".join(f"AND NOT EXISTS (SELECT 1 FROM {t} x WHERE x.{c} = r.id)" for t, c in refs)
    return (f"DELETE FROM {run} WHERE id IN (SELECT r.id FROM {run} r WHERE r.started_at < %s {unreferenced} "
            f"ORDER BY r.id LIMIT %s)")


def runs_referenced_before(before: datetime) -> int:
    """How many runs older than `before` are kept because the record points at them."""
    old = ReconcileRun.objects.filter(started_at__lt=before)
    return (old.filter(transitions__isnull=False) | old.filter(anomalies__isnull=False)
            | old.filter(id__in=ReconcileRequest.objects.filter(run__isnull=False).values("run_id"))).distinct().count()


def runs_retention_delete(before: datetime, *, batch: int = DEFAULT_BATCH) -> int:
    """Delete the ReconcileRun rows started before `before` that nothing references, in batches; the count."""
    return _sanctioned_delete(_run_delete_sql(), before, batch)


def _sanctioned_delete(sql: str, before: datetime, batch: int) -> int:
    """Run a `DELETE ... LIMIT batch` (`sql` takes `before` and `batch`) until it deletes fewer than a batch, each
    in its own transaction that says `SET LOCAL opsconsole.retention = 'on'` on PostgreSQL (what the append-only
    trigger lets through); the count."""
    total = 0
    while True:
        with transaction.atomic():
            with connection.cursor() as cur:
                if connection.vendor == "postgresql":
                    cur.execute("SET LOCAL opsconsole.retention = 'on'")
                cur.execute(sql, [before, batch])
                deleted = cur.rowcount
        total += deleted
        if deleted < batch:
            return total


def spans_retention_delete(before: datetime, *, batch: int = DEFAULT_BATCH) -> int:
    """Delete the Span rows that started before `before`, in batches; the count."""
    total = 0
    while True:
        ids = list(Span.objects.filter(start_time__lt=before).order_by("id").values_list("id", flat=True)[:batch])
        if not ids:
            return total
        deleted, _ = Span.objects.filter(id__in=ids).delete()
        total += deleted


def events_retention_delete(before: datetime, *, batch: int = DEFAULT_BATCH) -> int:
    """Delete the archived Kubernetes Events observed before `before`, in batches (each its own transaction that
    the append-only trigger lets through); the count."""
    table = KubeEvent._meta.db_table
    sql = (f"DELETE FROM {table} WHERE id IN (SELECT e.id FROM {table} e WHERE e.observed_at < %s "
           f"ORDER BY e.id LIMIT %s)")
    return _sanctioned_delete(sql, before, batch)


def retention_apply(*, runs_days: float | None, spans_days: float | None, events_days: float | None = None,
                    dry_run: bool = False, batch: int = DEFAULT_BATCH, now: datetime | None = None) -> RetentionReport:
    """Delete runs older than `runs_days`, spans older than `spans_days` and archived Events older than
    `events_days` (None: leave that table alone)."""
    now = now or timezone.now()
    report = RetentionReport()
    if runs_days is not None:
        before = now - timedelta(days=runs_days)
        report.runs_kept_referenced = runs_referenced_before(before)
        if dry_run:
            old = ReconcileRun.objects.filter(started_at__lt=before).count()
            report.runs_deleted = old - report.runs_kept_referenced
        else:
            report.runs_deleted = runs_retention_delete(before, batch=batch)
    if spans_days is not None:
        before = now - timedelta(days=spans_days)
        if dry_run:
            report.spans_deleted = Span.objects.filter(start_time__lt=before).count()
        else:
            report.spans_deleted = spans_retention_delete(before, batch=batch)
    if events_days is not None:
        before = now - timedelta(days=events_days)
        if dry_run:
            report.events_deleted = KubeEvent.objects.filter(observed_at__lt=before).count()
        else:
            report.events_deleted = events_retention_delete(before, batch=batch)
    return report
