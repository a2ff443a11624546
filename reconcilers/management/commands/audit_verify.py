"""`manage.py audit_verify`: check every resource's hash chain (transitions and spec revisions); exit 1 naming the
first broken row."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.audit import chain_verify


class Command(BaseCommand):
    """Verify the audit trail (DESIGN.md §4): edited, removed, reordered or inserted transitions and revisions."""

    help = ("Verify the per-resource hash chains (transitions and spec revisions); exit 1 and name the first "
            "broken row if any.")

    def add_arguments(self, parser: CommandParser) -> None:
        """--resource UID limits the check to one object's chain."""
        parser.add_argument("--resource", metavar="UID", help="verify only this resource's chain")

    def handle(self, *args: Any, **options: Any) -> None:
        """Print a summary when intact; otherwise each broken chain's first broken row, then fail."""
        report = chain_verify(options.get("resource"))
        if report.ok:
            revisions = f" and {report.revisions} spec revisions" if report.revisions else ""
            self.stdout.write(
                self.style.SUCCESS(
                    f"audit trail intact: {report.transitions} transitions{revisions} in {report.chains} chains "
                    "verified"
                )
            )
            return
        for found in report.breaks:
            self.stderr.write(f"BROKEN {found.describe()}")
        first = report.breaks[0]
        ident = first.transition_id if first.transition_id is not None else "-"
        raise CommandError(
            f"audit trail broken in {len(report.breaks)} of {report.chains} chains; first broken row: "
            f"resource={first.resource_uid} {first.position} id={ident} ({first.problem})"
        )
