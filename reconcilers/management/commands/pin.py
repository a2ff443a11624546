"""`manage.py pin <kind> <namespace>/<name> --generation N --reason "…" [--as USER]`: automatic rollback never
restores a generation older than the pinned one. See `reconcilers.management.healing_command`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from reconcilers.management.healing_command import HealingCommand
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing


class Command(HealingCommand):
    help = "Pin a generation of one object: automatic rollback never goes past it."
    action = "resource.pin"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--generation", type=int, required=True, help="the generation to pin")

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        return healing.resource_pin(resource, options["generation"], actor=actor, reason=reason)
