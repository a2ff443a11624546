"""`manage.py startkind Kind --group GROUP [--version V] [--owns g/v/Kind,...] [--cluster-scoped] [--package DIR]
[--plural P] [--project DIR]`: scaffold a new kind as a Python package (kind.py, a sample, a test) and print the
next steps. With `--project DIR`, the package goes in a repository of its own (pyproject.toml with the entry point,
README.md, ci.sh, Dockerfile), which depends on the opsconsole distribution and needs no clone of it.

The logic is `reconcilers.authoring.scaffold`; nothing is written, and nothing overwritten, when an input or the
target is refused.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.authoring import scaffold


class Command(BaseCommand):
    """Scaffold a kind: `<kind>/__init__.py`, `kind.py`, `samples/<kind>.yaml`, `tests/test_<kind>.py`."""

    help = "Scaffold a new kind (spec model, state machine, reconciler, sample, test) as a Python package."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        """Django's own `--version` (its version) gives way to the API version's."""
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        """The kind, its API group and the options of the scaffold."""
        parser.add_argument("kind", help="the kind, UpperCamelCase (e.g. Website)")
        parser.add_argument("--group", required=True, help="API group, a DNS subdomain (e.g. web.example.com)")
        parser.add_argument("--version", default=scaffold.DEFAULT_VERSION, dest="api_version",
                            help=f"API version (default {scaffold.DEFAULT_VERSION})")
        parser.add_argument("--owns", default="", metavar="G/V/KIND,...",
                            help="child kinds, comma-separated: group/version/Kind or version/Kind for the core "
                                 "group (e.g. apps/v1/Deployment,v1/Service)")
        parser.add_argument("--cluster-scoped", action="store_true", help="a cluster-scoped kind (default namespaced)")
        parser.add_argument("--package", metavar="DIR", help="the package directory (default ./<kind lower>)")
        parser.add_argument("--plural", help="the resource's plural (default: the English plural of the kind)")
        parser.add_argument("--project", metavar="DIR",
                            help="a repository of its own for the kind (pyproject.toml with the entry point, "
                                 "README.md, ci.sh, Dockerfile, the package inside); DIR's name is the "
                                 "distribution's, --package then names the package (default: the kind in lower case)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Plan (every check), write, and print what was written and the next steps."""
        try:
            plan = scaffold.plan(options["kind"], options["group"], version=options["api_version"],
                                 owns=options["owns"], cluster_scoped=options["cluster_scoped"],
                                 package_dir=options["package"], plural=options["plural"],
                                 project=options["project"])
            paths = scaffold.write(plan)
        except scaffold.ScaffoldError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"could not write the package: {exc}") from exc
        if options["project"]:
            shown = options["project"].rstrip("/")
        else:
            shown = options["package"].rstrip("/") if options["package"] else plan.kind.lower()
        scope = "namespaced" if plan.namespaced else "cluster-scoped"
        self.stdout.write(f"Created the {plan.kind} kind ({plan.plural}.{plan.group}/{plan.version}, {scope}) "
                          f"in {plan.directory}:")
        for path in paths:
            lines = path.read_text(encoding="utf-8").count("\n")
            self.stdout.write(f"  {path.relative_to(plan.directory.parent)}  ({lines} lines)")
        self.stdout.write("")
        self.stdout.write(scaffold.next_steps(plan, shown))
