"""`manage.py audit_checkpoint`: take, sign and write a checkpoint of the audit record now (a file under the
checkpoint directory and, unless --no-configmap, the cluster's ConfigMap)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from reconcilers.engine.checkpoint import checkpoint_write
from reconcilers.engine.checkpoint_clusters import describe


class Command(BaseCommand):
    """Write a signed checkpoint (reconcilers.engine.checkpoint)."""

    help = "Take, sign and write a checkpoint of the audit record (a file, and the ConfigMap in the cluster)."

    def add_arguments(self, parser: CommandParser) -> None:
        """--no-configmap writes the file only."""
        parser.add_argument("--no-configmap", action="store_true", help="write the file only, not the ConfigMap")

    def handle(self, *args: Any, **options: Any) -> None:
        """Write it and say where."""
        api = None
        if not options["no_configmap"]:
            from reconcilers.engine.apiclient import get_api_client

            try:
                api = get_api_client()
            except Exception as exc:
                self.stderr.write(f"no Kubernetes client ({exc}): the file only")
        written = checkpoint_write(api)
        doc = written.doc
        where = {True: "; ConfigMap written", False: "; the ConfigMap could not be written", None: ""}
        self.stdout.write(self.style.SUCCESS(
            f"audit checkpoint {doc['seq']}: {doc['tree_size']} chains, root {doc['root']}, "
            f"{doc['counts']['transitions']} transitions, action record at seq {doc['actions']['seq']}, "
            f"clusters: {describe(doc['clusters']) or 'none'} -> {written.path}{where[written.configmap]}"))
