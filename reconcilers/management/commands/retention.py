"""`manage.py retention --runs-days N --spans-days M`: delete old reconcile runs and spans, never transitions."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.retention import DEFAULT_BATCH, retention_apply


class Command(BaseCommand):
    """Apply the retention policy once (run it daily, e.g. from a CronJob)."""

    help = ("Delete ReconcileRun rows older than --runs-days (except runs a Transition, Anomaly or ReconcileRequest "
            "points at) and Span rows older than --spans-days. Transition rows are never deleted.")

    def add_arguments(self, parser: CommandParser) -> None:
        """--runs-days, --spans-days (at least one), --batch-size, --dry-run."""
        parser.add_argument("--runs-days", type=float, help="keep runs started within this many days")
        parser.add_argument("--spans-days", type=float, help="keep spans started within this many days")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="rows per delete transaction")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        """Validate the arguments, apply, print the counts."""
        runs_days, spans_days = options.get("runs_days"), options.get("spans_days")
        if runs_days is None and spans_days is None:
            raise CommandError("give --runs-days and/or --spans-days")
        for flag, value in (("--runs-days", runs_days), ("--spans-days", spans_days)):
            if value is not None and value < 1:
                raise CommandError(f"{flag} must be at least 1 (got {value:g})")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        report = retention_apply(runs_days=runs_days, spans_days=spans_days, dry_run=options["dry_run"],
                                 batch=options["batch_size"])
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(f"{verb} {report.runs_deleted} runs ({report.runs_kept_referenced} older runs kept: "
                          f"referenced by the audit trail or a request) and {report.spans_deleted} spans; "
                          "transitions are never deleted")
