"""`manage.py webhooks [--url URL] [--ca-bundle FILE] [--check FILE | --apply]`: the Mutating/
ValidatingWebhookConfigurations of the registered kinds (reconcilers.engine.webhook_config), as YAML.

Without `--url` they point at the deploy/kustomize Service `opsconsole/opsconsole-webhooks`; `--url` points them at a
server's base URL (the embedded run, tests). `--ca-bundle FILE` writes that CA (PEM) into them. `--check FILE`
writes nothing and fails when FILE is not what would be printed (CI runs it on deploy/webhooks/configurations.yaml).
`--apply` server-side applies them to the configured cluster (KUBECONFIG) instead of printing them, with the
kinds' own `failurePolicy` (unlike `runwebhooks --install`, the sandbox's Ignore).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.webhooks.install import FIELD_MANAGER, KINDS
from reconcilers.engine import apiclient, kube
from reconcilers.engine.webhook_config import webhook_configurations, webhook_configurations_yaml


class Command(BaseCommand):
    """Print (or check) the webhook configurations."""

    help = "Print the admission webhook configurations of the registered kinds (YAML)."

    def add_arguments(self, parser: CommandParser) -> None:
        """--url, --ca-bundle, --check, --apply."""
        parser.add_argument("--url", help="the webhook server's base URL (default: the deploy/kustomize Service)")
        parser.add_argument("--ca-bundle", help="a PEM file with the CA that signed the server's certificate")
        parser.add_argument("--check", metavar="FILE", help="fail when FILE is not the current output")
        parser.add_argument("--apply", action="store_true",
                            help="server-side apply them to the cluster (KUBECONFIG) instead of printing them")

    def handle(self, *args: Any, **options: Any) -> None:
        """Write the YAML to stdout, or compare it with --check FILE."""
        bundle = Path(options["ca_bundle"]).read_bytes() if options.get("ca_bundle") else None
        if options.get("apply"):
            api = apiclient.get_api_client()
            for doc in webhook_configurations(url=options.get("url"), ca_bundle=bundle):
                kube.apply_object(api, KINDS[doc["kind"]], None, doc["metadata"]["name"], doc,
                                  field_manager=FIELD_MANAGER, force=True)
                self.stdout.write(f"{doc['kind']} {doc['metadata']['name']} applied ({len(doc['webhooks'])} "
                                  f"webhook{'s' if len(doc['webhooks']) != 1 else ''})")
            return
        text = webhook_configurations_yaml(url=options.get("url"), ca_bundle=bundle)
        if options.get("check"):
            if Path(options["check"]).read_text(encoding="utf-8") != text:
                raise CommandError(f"{options['check']} is stale: regenerate it with `manage.py webhooks`")
            self.stdout.write(f"{options['check']} is current")
            return
        self.stdout.write(text, ending="")
