"""`manage.py slo_rules [--check FILE]`: the Prometheus recording and burn-rate rules of every registered kind's
phase objectives (reconcilers.engine.slo_rules).

Without options it prints the rules file (deploy/prometheus/slo.yml is its checked-in output); `--check FILE`
writes nothing and fails (exit 1) when FILE differs from what the kinds generate. A declared objective whose bound is
not a bucket of opsconsole_phase_seconds is refused, naming the kind and the objective.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine import registry
from reconcilers.engine.slo_rules import SloRulesError, slo_rules_yaml


class Command(BaseCommand):
    """Print (or check) deploy/prometheus/slo.yml."""

    help = "Print, or check with --check FILE, the Prometheus SLO rules generated from the kinds' phase objectives."

    def add_arguments(self, parser: CommandParser) -> None:
        """--check FILE exits 1 when FILE differs from what would be generated."""
        parser.add_argument("--check", metavar="FILE", help="fail when FILE is not the current output")

    def handle(self, *args: Any, **options: Any) -> None:
        """Write the YAML to stdout, or compare it with --check FILE."""
        try:
            text = slo_rules_yaml(registry.registered())
        except SloRulesError as exc:
            raise CommandError(str(exc)) from exc
        if options.get("check"):
            try:
                with open(options["check"], encoding="utf-8") as fh:
                    current = fh.read()
            except FileNotFoundError:
                raise CommandError(f"{options['check']} is missing: generate it with `manage.py slo_rules`") from None
            if current != text:
                raise CommandError(f"{options['check']} is stale: regenerate it with `manage.py slo_rules`")
            self.stdout.write(f"{options['check']} is current")
            return
        self.stdout.write(text, ending="")
