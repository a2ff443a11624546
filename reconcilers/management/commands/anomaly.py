"""`manage.py anomaly acknowledge|assign|resolve <kind> <namespace>/<name> --rule RULE [--note "…"] [--to USER]
[--as USER]`: escalation from the shell, for an anomaly that needs a person (docs/healing.md, Escalation). A note
is required to resolve; `--to` names the assignee. See `reconcilers.management.healing_command`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from opsconsole.accounts.assignees import assignee_refusal
from reconcilers.management.healing_command import HealingCommand
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import escalation


class Command(HealingCommand):
    help = "Acknowledge, assign or resolve an anomaly of one object that needs a person."
    action = "anomaly"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("step", choices=escalation.STEPS, help="what to do")
        parser.add_argument("kind", help="the kind: Memcached, memcached, memcacheds or memcacheds.cache.example.com")
        parser.add_argument("target", help="<namespace>/<name>, or <name> for a cluster-scoped kind")
        parser.add_argument("--rule", required=True, help="the anomaly's rule (e.g. rollback_failed, stuck)")
        parser.add_argument("--note", default="", help="recorded with the healing record (required to resolve)")
        parser.add_argument("--to", default="", help="assign: the username of the assignee")
        parser.add_argument("--as", dest="as_user", default=None, help="who acts (default: your login name)")

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        if options["step"] == "assign":
            why = assignee_refusal(options["to"], resource.namespace, resource.cluster)
            if why is not None:
                raise escalation.HealingRefused(why, field="assignee", status=400)
        return escalation.anomaly_step(options["step"], resource, options["rule"], actor=actor, note=reason,
                                       assignee=options["to"])

    def handle(self, *args: Any, **options: Any) -> None:
        self.action = f"anomaly.{options['step']}"
        if options["step"] == "assign" and not options["to"]:
            raise CommandError("assign needs --to USER")
        super().handle(*args, **{**options, "reason": options["note"]})
