"""`HealingCommand`, the base of the healing commands (`rollback`, `suspend`, `resume`, `pin`, `unpin`): the object
named as `manage.py reconcile` names it (a kind, then `<namespace>/<name>` or `<name>`), the actor `user:<USER>`
(`--as`, default the login name), one ActionRecord per attempt (auth `command`, like `manage.py token`'s), and a
refusal (`HealingRefused`) printed with the field at fault and exit status 1.
"""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.accounts.action_records import action_record
from reconcilers.engine import registry
from reconcilers.management.naming import named_request
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import healing


def login_name() -> str:
    """The shell user's login name ('unknown' without a passwd entry)."""
    try:
        return getpass.getuser()
    except Exception:  # a container without a passwd entry
        return "unknown"


class HealingCommand(BaseCommand):
    """A healing action on one object from the shell (see the module docstring); subclasses set `action` and
    implement `act`."""

    action = ""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", help="the kind: Memcached, memcached, memcacheds or memcacheds.cache.example.com")
        parser.add_argument("target", help="<namespace>/<name>, or <name> for a cluster-scoped kind")
        parser.add_argument("--reason", required=True, help="why (recorded with the healing record)")
        parser.add_argument("--as", dest="as_user", default=None, help="who acts (default: your login name)")

    def act(self, resource: Resource, actor: str, reason: str, options: dict[str, Any]) -> HealingRecord:
        raise NotImplementedError

    @staticmethod
    def target_named(kind_name: str, target: str) -> str:
        """The record's target for an object not found: its key, as every action names an object, when the kind
        is registered; else what was typed."""
        try:
            kind = registry.for_name(kind_name).resource
        except registry.UnknownKind:
            return f"{kind_name} {target}"
        namespace, _, name = target.rpartition("/")
        return "/".join((kind.group, kind.version, kind.plural, namespace, name))

    def resource(self, kind_name: str, target: str) -> Resource:
        """The mirrored resource named like `manage.py reconcile` names it (the live row, else the newest)."""
        key = named_request(kind_name, target).key()
        row = Resource.objects.filter(key=key).order_by("deleted", "-created_at", "-id").first()
        if row is None:
            raise CommandError(f"no {registry.for_name(kind_name).resource.kind} {target} on record")
        return row

    def handle(self, *args: Any, **options: Any) -> None:
        user = options["as_user"] or login_name()
        reason = options["reason"]
        path = f"manage.py {self.action.removeprefix('resource.')} {options['kind']} {options['target']}"

        def record(status: int, target: str, detail: dict[str, Any]) -> None:
            action_record(action=self.action, method="CLI", path=path, status_code=status, actor=user,
                          auth="command", target=target, reason=reason, detail={"via": "command", **detail})

        try:
            resource = self.resource(options["kind"], options["target"])
        except CommandError as exc:
            record(404, self.target_named(options["kind"], options["target"]), {"message": str(exc)})
            raise
        try:
            done = self.act(resource, f"user:{user}", reason, options)
        except healing.HealingRefused as exc:
            record(exc.status, resource.key, {"message": exc.message, "field": exc.field})
            raise CommandError(f"refused ({exc.field}): {exc.message}") from exc
        except CommandError as exc:
            record(400, resource.key, {"message": str(exc)})
            raise
        except Exception as exc:  # the Kubernetes API did not answer
            record(503, resource.key, {"message": f"{type(exc).__name__}: {exc}"})
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        record(202, resource.key, {"healing_record": done.seq, "healing_action": done.action})
        self.stdout.write(f"{done.action:<18} {done.created_at.isoformat()}  {resource.kind} {options['target']}  "
                          f"by {done.actor}: {done.message}")
