"""`manage.py token`: API tokens for automation, without the console or a CSRF dance.

    manage.py token create --user U [--role R] [--expires 30d] [--name N] [--description D]
    manage.py token list [--user U] [--all]
    manage.py token revoke ID

`create` prints the token once (on stdout, alone on its line, so `TOKEN=$(manage.py token create …)` works) and
stores only its sha256. `--role` limits the token below its user's role; the user and their role (a Django
group: viewer, operator, admin) must exist. Every create and revoke, refused ones too, is appended to the
action record with the operating-system user running the command as actor (`cli:<user>`, auth `command`).
"""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.models import ApiToken
from opsconsole.accounts.roles import ROLES, user_role
from opsconsole.accounts.tokens import TokenError, token_create, token_expiry_parse, token_list, token_revoke


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no login name (a container without a passwd entry)
        return "cli:unknown"


class Command(BaseCommand):
    help = "Create, list and revoke API tokens (a new token is printed once)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="{create,list,revoke}")
        create = sub.add_parser("create", help="create a token for a user and print it once")
        create.add_argument("--user", required=True, help="the username the token acts as")
        create.add_argument("--role", choices=ROLES, default="", help="limit the token to this role (at most the "
                                                                      "user's own); default: the user's role")
        create.add_argument("--expires", default="", help="30d, 12h, 90m, 2w or 'never' (the default)")
        create.add_argument("--name", default="", help="what the token is for (default: cli-<date>)")
        create.add_argument("--description", default="", help="more about its use")
        listing = sub.add_parser("list", help="list tokens (never their secrets)")
        listing.add_argument("--user", default="", help="only this user's tokens")
        listing.add_argument("--all", action="store_true", help="also revoked and expired ones")
        revoke = sub.add_parser("revoke", help="revoke a token by id")
        revoke.add_argument("id", help="the token's id (see `token list`)")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['subcommand']}")(options)

    def _record(self, action: str, status: int, target: str, command: str, detail: dict[str, Any]) -> None:
        action_record(action=action, method="CLI", path=f"manage.py token {command}", status_code=status,
                      actor=_actor(), auth="command", target=target, detail={"via": "command", **detail})

    def _refuse(self, action: str, status: int, target: str, command: str, message: str) -> CommandError:
        self._record(action, status, target, command, {"message": message})
        return CommandError(message)

    def _create(self, options: dict[str, Any]) -> None:
        username = options["user"]
        target = f"user:{username}"
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise self._refuse("token.create", 404, target, "create", f"no such user: {username}") from None
        if not user.is_active:
            raise self._refuse("token.create", 400, target, "create", f"{username} is not active")
        name = options["name"] or f"cli-{timezone.now():%Y-%m-%d}"
        try:
            expiry = token_expiry_parse(options["expires"])
            issued = token_create(user, name=name, description=options["description"], role=options["role"],
                                  expires_at=timezone.now() + expiry if expiry else None)
        except TokenError as exc:
            raise self._refuse("token.create", exc.status, target, "create", exc.message) from exc
        token = issued.token
        self._record("token.create", 201, target, "create", {"token_id": token.pk, "prefix": token.prefix})
        expires = token.expires_at.isoformat() if token.expires_at else "never"
        role = f"role {token.role}" if token.role else f"the user's own role ({user_role(user) or 'none'})"
        self.stderr.write(f"token {token.pk} ({token.name}) for {username}, {role}, "
                          f"expires {expires}. It is shown this once:")
        self.stdout.write(issued.secret)

    def _list(self, options: dict[str, Any]) -> None:
        qs = token_list()
        if options["user"]:
            qs = qs.filter(user__username=options["user"])
        now = timezone.now()
        if not options["all"]:
            qs = qs.filter(revoked_at__isnull=True).exclude(expires_at__lte=now)
        rows = [("ID", "USER", "NAME", "PREFIX", "ROLE", "CREATED", "LAST USED", "EXPIRES", "STATE")]
        for t in qs[:1000]:
            state = "revoked" if t.revoked_at else "expired" if t.expires_at and t.expires_at <= now else "active"
            used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "-"
            expires = f"{t.expires_at:%Y-%m-%d %H:%M}" if t.expires_at else "never"
            rows.append((str(t.pk), t.user.get_username(), t.name, t.prefix + "…", t.role or "-",
                         f"{t.created_at:%Y-%m-%d %H:%M}", used, expires, state))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            self.stdout.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())

    def _revoke(self, options: dict[str, Any]) -> None:
        raw = options["id"]
        try:
            token = ApiToken.objects.select_related("user").get(pk=int(raw))
        except (ValueError, OverflowError, ApiToken.DoesNotExist):
            raise self._refuse("token.revoke", 404, f"token:{raw}", "revoke", f"no such token: {raw}") from None
        changed = token_revoke(token)
        self._record("token.revoke", 204, f"token:{token.pk}", "revoke",
                     {"prefix": token.prefix, "owner": token.user.get_username(), "changed": changed})
        self.stdout.write(f"token {token.pk} ({token.prefix}…, {token.user.get_username()}) "
                          + ("revoked" if changed else "was already revoked"))
