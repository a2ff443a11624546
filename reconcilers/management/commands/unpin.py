"""`manage.py unpin <kind> <namespace>/<name> --reason "…" [--as USER]`: remove the pinned generation. See
`reconcilers.management.healing_command`."""

from __future__ import annotations

from typing import Any

from reconcilers.management.healing_command import HealingCommand
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing


class Command(HealingCommand):
    help = "Remove the pinned generation of one object."
    action = "resource.unpin"

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        return healing.resource_unpin(resource, actor=actor, reason=reason)
