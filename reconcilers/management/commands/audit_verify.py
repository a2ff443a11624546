"""`manage.py audit_verify`: check every resource's hash chain (transitions and spec revisions), the action
record's chain, the reconcile requests' identities and the database against the newest signed checkpoint
(reconcilers.engine.checkpoint); exit 1 naming the first broken row or the first thing the checkpoint misses, or
saying why the database could not be checked against the newest checkpoint (an unreadable file, a newer format,
a checkpoint of another database)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.audit import chain_verify, record_verify
from reconcilers.engine.checkpoint import NOT_CHECKED, checkpoint_verify, configmap_check
from reconcilers.engine.checkpoint_clusters import describe


class Command(BaseCommand):
    """Verify the audit trail: edited, removed, reordered, inserted or moved transitions and
    revisions; edited or removed action records; reconcile requests whose identity changed."""

    help = ("Verify the per-resource hash chains (transitions and spec revisions), the action record's chain and "
            "the reconcile requests' identities; exit 1 and name the first broken row if any.")

    def add_arguments(self, parser: CommandParser) -> None:
        """--resource UID limits the check to one object's chain."""
        parser.add_argument("--resource", metavar="UID", help="verify only this resource's chain")
        parser.add_argument("--cluster", action="store_true",
                            help="also check the cluster's checkpoint ConfigMap against the newest file")

    def handle(self, *args: Any, **options: Any) -> None:
        """Print a summary when intact; otherwise each broken chain's first broken row, then fail."""
        uid = options.get("resource")
        report = chain_verify(uid)
        problems = [] if uid else record_verify()
        against = None if uid else checkpoint_verify()
        if against is not None:
            problems += against.problems or []
        if options.get("cluster"):
            from reconcilers.engine.apiclient import get_api_client

            problems += configmap_check(get_api_client())
        if report.ok and not problems:
            revisions = f", {report.revisions} spec revisions" if report.revisions else ""
            revisions += f", {report.healing} healing records" if report.healing else ""
            records = "" if uid else "; action record chain and reconcile request identities verified"
            if against is not None:
                records += (f"; matches signed checkpoint {against.seq} of {against.created_at}"
                            if against.seq is not None else "; no signed checkpoint yet")
                if against.clusters:
                    records += f" (clusters: {describe(against.clusters)})"
                records += "".join(f" ({note})" for note in against.notes or [])
            self.stdout.write(
                self.style.SUCCESS(
                    f"audit trail intact: {report.transitions} transitions{revisions} in {report.chains} chains "
                    f"verified{records}"
                )
            )
            return
        for found in report.breaks:
            self.stderr.write(f"BROKEN {found.describe()}")
        for problem in problems:
            self.stderr.write(f"{'NOT CHECKED' if problem.problem in NOT_CHECKED else 'BROKEN'} {problem.describe()}")
        if report.breaks:
            first = report.breaks[0]
            ident = first.transition_id if first.transition_id is not None else "-"
            raise CommandError(
                f"audit trail broken in {len(report.breaks)} of {report.chains} chains; first broken row: "
                f"resource={first.resource_uid} {first.position} id={ident} ({first.problem})"
            )
        first_problem = problems[0]
        if all(problem.problem in NOT_CHECKED for problem in problems):  # nothing broken seen, nothing compared
            raise CommandError(f"audit record not checked against a signed checkpoint: {first_problem.detail}")
        raise CommandError(f"audit record broken: {first_problem.record} {first_problem.ident} "
                           f"({first_problem.problem})")
