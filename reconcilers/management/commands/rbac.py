"""`manage.py rbac`: print the least-privilege ClusterRole generated from the registered reconcilers."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.rbac import RbacError, cluster_role_yaml


class Command(BaseCommand):
    """Print (or check) the ClusterRole that `deploy/kustomize/base/rbac.yaml` holds."""

    help = "Print the least-privilege ClusterRole for the registered reconcilers (YAML)."

    def add_arguments(self, parser: CommandParser) -> None:
        """--check FILE exits 1 when FILE differs from what would be generated."""
        parser.add_argument("--check", metavar="FILE", help="fail when FILE is not the current output")

    def handle(self, *args: Any, **options: Any) -> None:
        """Write the YAML to stdout, or compare it with --check FILE."""
        try:
            text = cluster_role_yaml()
        except RbacError as exc:
            raise CommandError(str(exc)) from exc
        if options.get("check"):
            with open(options["check"], encoding="utf-8") as fh:
                if fh.read() != text:
                    raise CommandError(f"{options['check']} is stale: regenerate it with `manage.py rbac`")
            self.stdout.write(f"{options['check']} is current")
            return
        self.stdout.write(text, ending="")
