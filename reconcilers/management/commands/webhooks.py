"""`manage.py webhooks [--url URL] [--ca-bundle FILE] [--check FILE]`: the Mutating/ValidatingWebhookConfigurations
of the registered kinds (reconcilers.engine.webhook_config), as YAML.

Without `--url` they point at the deploy/k8s Service `opsconsole/opsconsole-webhooks`; `--url` points them at a
server's base URL (the embedded run, tests). `--ca-bundle FILE` writes that CA (PEM) into them. `--check FILE`
writes nothing and fails when FILE is not what would be printed (CI runs it on deploy/k8s/webhooks.yaml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.engine.webhook_config import webhook_configurations_yaml


class Command(BaseCommand):
    """Print (or check) the webhook configurations."""

    help = "Print the admission webhook configurations of the registered kinds (YAML)."

    def add_arguments(self, parser: CommandParser) -> None:
        """--url, --ca-bundle, --check."""
        parser.add_argument("--url", help="the webhook server's base URL (default: the deploy/k8s Service)")
        parser.add_argument("--ca-bundle", help="a PEM file with the CA that signed the server's certificate")
        parser.add_argument("--check", metavar="FILE", help="fail when FILE is not the current output")

    def handle(self, *args: Any, **options: Any) -> None:
        """Write the YAML to stdout, or compare it with --check FILE."""
        bundle = Path(options["ca_bundle"]).read_bytes() if options.get("ca_bundle") else None
        text = webhook_configurations_yaml(url=options.get("url"), ca_bundle=bundle)
        if options.get("check"):
            if Path(options["check"]).read_text(encoding="utf-8") != text:
                raise CommandError(f"{options['check']} is stale: regenerate it with `manage.py webhooks`")
            self.stdout.write(f"{options['check']} is current")
            return
        self.stdout.write(text, ending="")
