"""`manage.py suspend <kind> <namespace>/<name> --reason "…" [--for 1h|30m|…] [--until RFC3339] [--as USER]`: suspend
one object's reconciles (the healing record and the `opsconsole.io/suspended` annotation); without `--for` or
`--until` until resumed. See `reconcilers.management.healing_command` for the naming, the actor and the action
record."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from reconcilers.core.meta import parse_rfc3339
from reconcilers.management.healing_command import HealingCommand
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^(\d{1,7})([smhdw])$")


def duration(text: str) -> timedelta:
    """`90s`, `30m`, `1h`, `2d`, `1w` as a timedelta (CommandError otherwise)."""
    match = _DURATION.match(text.strip())
    if not match:
        raise CommandError(f"--for: give a duration like 30m, 1h, 2d (got {text!r})")
    return timedelta(seconds=int(match[1]) * _UNITS[match[2]])


def until_of(options: dict[str, Any], now: datetime) -> datetime | None:
    """When the suspension ends, from `--for` or `--until` (None: until resumed)."""
    if options.get("for") and options.get("until"):
        raise CommandError("give --for or --until, not both")
    if options.get("for"):
        return now + duration(options["for"])
    if options.get("until"):
        moment = parse_rfc3339(options["until"])
        if moment is None:
            raise CommandError(f"--until: not an RFC 3339 time: {options['until']!r}")
        return moment
    return None


class Command(HealingCommand):
    help = "Suspend one object's reconciles with a reason, optionally for a while or until a time."
    action = "resource.suspend"

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--for", dest="for", default="", help="how long: 30m, 1h, 2d, 1w")
        parser.add_argument("--until", default="", help="when it ends (RFC 3339)")

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        return healing.resource_suspend(resource, actor=actor, reason=reason, until=until_of(options, timezone.now()))
