"""`manage.py grant`: limit a user to namespaces, of one cluster or of every one.

    manage.py grant add --user U prod/team-a team-b prod/     (prod's team-a, team-b of every cluster, prod's
                                                               cluster-scoped objects)
    manage.py grant remove --user U prod/team-a [--unlimit]   (--unlimit: the last grant too)
    manage.py grant list --user U

A grant is `cluster/namespace`, `namespace` (every cluster), `cluster/` (one cluster's cluster scope) or ''
(every cluster's cluster scope). A user without any grant is not limited; one with grants sees only those. Every
add and remove, refused ones too, is appended to the action record with the operating-system user running the
command as actor (`cli:<user>`, auth `command`), as `manage.py token` does. Removing a user's last grant
would lift every limit: it is refused without `--unlimit`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.grants import GrantError, grant_parse, grants_add, grants_of, grants_remove
from opsconsole.accounts.management.commands.token import _actor
from reconcilers.services.selectors.scope import grant_text


class Command(BaseCommand):
    help = "Add, remove and list a user's namespace grants (cluster/namespace, or namespace for every cluster)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True)
        for name in ("add", "remove"):
            cmd = sub.add_parser(name)
            cmd.add_argument("--user", required=True, help="the username")
            cmd.add_argument("grants", nargs="+", help="cluster/namespace, namespace, cluster/ or ''")
            if name == "remove":
                cmd.add_argument("--unlimit", action="store_true",
                                 help="allow removing the last grant (the user is then not limited at all)")
        listing = sub.add_parser("list")
        listing.add_argument("--user", required=True, help="the username")

    def handle(self, *args: Any, **options: Any) -> None:
        command = options["command"]
        try:
            user = get_user_model().objects.get(username=options["user"])
        except get_user_model().DoesNotExist as exc:
            if command != "list":
                self._record(command, 404, f"user:{options['user']}", {"message": "no such user"})
            raise CommandError(f"No such user: {options['user']}") from exc
        if command == "list":
            for text in grants_of(user):
                self.stdout.write(text or "''")
            if not grants_of(user):
                self.stdout.write("(no grant: not limited)")
            return
        target = f"user:{user.get_username()}"
        if command == "remove" and not options.get("unlimit") and self._would_unlimit(user, options["grants"]):
            message = "that removes every grant, which leaves the user not limited at all: add --unlimit to mean it"
            self._record(command, 409, target, {"message": message, "grants": list(options["grants"])})
            raise CommandError(message)
        try:
            done = (grants_add if command == "add" else grants_remove)(user, list(options["grants"]))
        except GrantError as exc:
            self._record(command, 400, target, {"message": str(exc), "grants": list(options["grants"])})
            raise CommandError(str(exc)) from exc
        self._record(command, 200, target, {"grants": done, "now": grants_of(user)})
        self.stdout.write(f"{'added' if command == 'add' else 'removed'}: {', '.join(done) or 'nothing'}")
        if not grants_of(user):
            self.stdout.write(f"{user.get_username()} has no grant left: not limited by namespace")

    @staticmethod
    def _would_unlimit(user: Any, texts: list[str]) -> bool:
        try:
            gone = {grant_text(*grant_parse(t)) for t in texts}
        except GrantError:
            return False  # refused below, naming the bad grant
        held = set(grants_of(user))
        return bool(held) and held <= gone

    def _record(self, command: str, status: int, target: str, detail: dict[str, Any]) -> None:
        action_record(action=f"grant.{command}", method="CLI", path=f"manage.py grant {command}", status_code=status,
                      actor=_actor(), auth="command", target=target, detail=detail)
