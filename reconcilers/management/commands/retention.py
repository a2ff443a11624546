"""`manage.py retention --runs-days N --spans-days M [--events-days E]`: delete old reconcile runs, spans and
archived Kubernetes Events, never transitions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.capture_store import captures_expire, retention_days
from reconcilers.engine.retention import DEFAULT_BATCH, retention_apply


class Command(BaseCommand):
    """Apply the retention policy once (run it daily, e.g. from a CronJob)."""

    help = ("Delete ReconcileRun rows older than --runs-days (except runs a Transition, Anomaly or ReconcileRequest "
            "points at), Span rows older than --spans-days and archived Kubernetes Events older than --events-days "
            "(default OPSCONSOLE_EVENT_RETENTION_DAYS, 30; 0 there keeps them). Transition rows are never deleted.")

    def add_arguments(self, parser: CommandParser) -> None:
        """--runs-days, --spans-days, --events-days (at least one), --batch-size, --dry-run."""
        parser.add_argument("--runs-days", type=float, help="keep runs started within this many days")
        parser.add_argument("--spans-days", type=float, help="keep spans started within this many days")
        parser.add_argument("--events-days", type=float,
                            help="keep archived Kubernetes Events observed within this many days (default: "
                                 "OPSCONSOLE_EVENT_RETENTION_DAYS whenever the command runs)")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="rows per delete transaction")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        """Validate the arguments, apply, print the counts."""
        runs_days, spans_days = options.get("runs_days"), options.get("spans_days")
        events_days = options.get("events_days")
        if runs_days is None and spans_days is None and events_days is None:
            raise CommandError("give --runs-days and/or --spans-days (and/or --events-days)")
        for flag, value in (("--runs-days", runs_days), ("--spans-days", spans_days), ("--events-days", events_days)):
            if value is not None and value < 1:
                raise CommandError(f"{flag} must be at least 1 (got {value:g})")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        if events_days is None:
            configured = float(getattr(settings, "OPSCONSOLE_EVENT_RETENTION_DAYS", 30) or 0)
            events_days = configured if configured > 0 else None
        report = retention_apply(runs_days=runs_days, spans_days=spans_days, events_days=events_days,
                                 dry_run=options["dry_run"], batch=options["batch_size"])
        verb = "would delete" if options["dry_run"] else "deleted"
        # kept runs' inputs for replay: their own retention, OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS (rows stay, "gone")
        inputs = captures_expire(dry_run=options["dry_run"])
        self.stdout.write(f"{verb} the kept inputs of {inputs} runs (older than {retention_days():g} days)")
        self.stdout.write(f"{verb} {report.runs_deleted} runs ({report.runs_kept_referenced} older runs kept: "
                          f"referenced by the audit trail or a request), {report.spans_deleted} spans and "
                          f"{report.events_deleted} archived Events; "
                          "transitions are never deleted")
