"""`manage.py resume <kind> <namespace>/<name> --reason "…" [--as USER]`: resume one object's reconciles (the
annotation removed, the key enqueued). See `reconcilers.management.healing_command`."""

from __future__ import annotations

from typing import Any

from reconcilers.management.healing_command import HealingCommand
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing


class Command(HealingCommand):
    help = "Resume one object's reconciles."
    action = "resource.resume"

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        return healing.resource_resume(resource, actor=actor, reason=reason)
