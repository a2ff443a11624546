"""`manage.py rollback <kind> <namespace>/<name> --to-generation N --reason "…" [--as USER]`: restore the spec of an
earlier generation (the same path as the console and the API: `reconcilers.services.healing.resource_rollback`).
See `reconcilers.management.healing_command` for the naming, the actor and the action record.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from reconcilers.management.healing_command import HealingCommand
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing


class Command(HealingCommand):
    help = "Roll one object back to the spec of an earlier generation (audited with the actor and the reason)."
    action = "resource.rollback"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--to-generation", type=int, required=True, help="the generation whose spec to restore")

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        return healing.resource_rollback(resource, options["to_generation"], actor=actor, reason=reason)
