"""API tokens: created and shown once, stored as sha256, revocable, with a last-used time; the limits a token puts
on the tokens it mints, and on its user's role for the request it comes with.

A token is `oc_` followed by 43 URL-safe characters (256 bits from `secrets`): with that much entropy a
plain sha256 is the right storage (as GitHub's tokens), so checking one is a single indexed lookup.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from opsconsole.accounts.models import ApiToken, NamespaceGrant
from opsconsole.accounts.roles import (
    ADMIN,
    ROLES,
    role_above,
    role_cap_set,
    user_covers,
    user_has_role,
    user_namespaces,
    user_role,
)
from reconcilers.services.selectors.scope import scope_q

TOKEN_PREFIX = "oc_"
#: last_used_at is written at most this often per token (one UPDATE per request would be wasteful)
LAST_USED_GRANULARITY = timedelta(seconds=30)


@dataclass(frozen=True)
class IssuedToken:
    """A token just created: `secret` is shown to the user this once and never stored."""

    token: ApiToken
    secret: str


def token_hash(secret: str) -> str:
    """The stored form of a token: its sha256, hex."""
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenError(ValueError):
    """A token that cannot be made as asked: `status` is the HTTP status the refusal answers with (400: bad
    input; 403: more than the user may have)."""

    def __init__(self, message: str, *, field: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


_DURATION_RE = re.compile(r"^\s*(\d{1,6})\s*([smhdw]?)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}
#: the longest expiry one may ask (ten years)
MAX_EXPIRY = timedelta(days=3650)


def token_expiry_parse(text: str | None) -> timedelta | None:
    """`30d`, `12h`, `90m`, `2w`, `3600s` or a number of days (`30`) as a timedelta; ''/None/`never` → None
    (no expiry). TokenError for anything else, or above MAX_EXPIRY."""
    if text is None or text.strip().lower() in ("", "never", "none"):
        return None
    match = _DURATION_RE.match(text)
    if not match or int(match.group(1)) == 0:
        raise TokenError("an expiry is a positive number with a unit: 30d, 12h, 90m, 2w, 3600s (or 'never')",
                         field="expires")
    delta = timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    if delta > MAX_EXPIRY:
        raise TokenError("an expiry is at most 3650 days", field="expires")
    return delta


def token_create(user: Any, *, name: str, expires_at: datetime | None = None, description: str = "",
                 role: str = "", via: ApiToken | None = None, expiry_field: str = "expires") -> IssuedToken:
    """Create a token for `user`; the returned secret is the only time the token is seen in clear. `role`
    limits the token below its user's role (TokenError when above it, or the user holds no role). `via` is the
    token the request that asks came with (None: a session or the command): see `token_mint_limits`."""
    role, expires_at = token_mint_limits(via, user, role=role, expires_at=expires_at, expiry_field=expiry_field)
    name = name.strip()
    if not name or len(name) > 100:
        raise TokenError("a token needs a name of 1 to 100 characters", field="name")
    if len(description) > 1000:
        raise TokenError("the description is at most 1000 characters", field="description")
    if role:
        if role not in ROLES:
            raise TokenError(f"the role is one of {', '.join(ROLES)}", field="role")
        if not user_has_role(user, role):
            held = user_role(user) or "no role"
            raise TokenError(f"{user.get_username()} holds {held}: a token cannot have more than its user's role",
                             field="role", status=403)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=secret[: len(TOKEN_PREFIX) + 6], hash=token_hash(secret), expires_at=expires_at,
        description=description, role=role,
    )
    return IssuedToken(token, secret)


def token_mint_limits(via: ApiToken | None, user: Any, *, role: str, expires_at: datetime | None,
                      expiry_field: str = "expires") -> tuple[str, datetime | None]:
    """The role and expiry of a token for `user` asked for through the token `via` (None: a session or the
    command, which limits nothing): a token never mints one above its own role nor past its own expiry. Left out,
    the role is `via`'s effective role when `via` is capped (and the new token would act above it), and the expiry
    `via`'s; asked above either, TokenError (403, naming the field: `role` or `expiry_field`)."""
    if via is None:
        return role, expires_at
    effective = user_role(via.user)  # the request's user object: the cap is on it
    if via.role:
        if not role:
            if user.pk == via.user_id or role_above(user_role(user) or "viewer", effective):
                role = effective or via.role
        elif role in ROLES and role_above(role, effective):
            raise TokenError(f"this token acts as {effective or 'no role'}: the token it creates cannot have more",
                             field="role", status=403)
    if via.expires_at is not None:
        if expires_at is None:
            expires_at = via.expires_at
        elif expires_at > via.expires_at:
            raise TokenError(f"this token expires at {via.expires_at.isoformat()}: the token it creates cannot "
                             "outlive it", field=expiry_field, status=403)
    return role, expires_at


def token_role_cap(token: ApiToken) -> None:
    """Cap the token's user (this request's user object) at the token's role when it has one: `user_role`
    then answers the lower of the two for the request, for superusers as for everyone."""
    role_cap_set(token.user, token.role)


def token_refusal(secret: str) -> tuple[str, str]:
    """Why `secret` is refused (after token_authenticate said None): (code, message). Says whether the token
    expired or was revoked (its holder has the secret: that tells nothing new) and otherwise nothing."""
    token = None
    if secret.startswith(TOKEN_PREFIX) and len(secret) <= 128:
        token = ApiToken.objects.select_related("user").filter(hash=token_hash(secret)).first()
    if token is None:
        return "token_invalid", "The token is not valid."
    if token.revoked_at is not None:
        return "token_revoked", f"The token {token.prefix}… was revoked at {token.revoked_at.isoformat()}."
    if token.expires_at is not None and token.expires_at <= timezone.now():
        return ("token_expired", f"The token {token.prefix}… expired at {token.expires_at.isoformat()}; "
                                 "create a new one on the console's Tokens page or with manage.py token create.")
    return "token_invalid", "The token's user is inactive."


def token_may_manage(actor: Any, token: ApiToken) -> bool:
    """Whether `actor` may see and revoke `token`: their own, or (admins) those of users they cover."""
    return token.user_id == actor.pk or (user_has_role(actor, ADMIN) and user_covers(actor, token.user))


def token_authenticate(secret: str) -> ApiToken | None:
    """The live token (not revoked, not expired, its user active) whose secret this is, or None. Records the
    use (last_used_at) at most every LAST_USED_GRANULARITY."""
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 128:
        return None
    now = timezone.now()
    token = (
        ApiToken.objects.select_related("user")
        .filter(hash=token_hash(secret), revoked_at__isnull=True, user__is_active=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .first()
    )
    if token is None:
        return None
    if token.last_used_at is None or token.last_used_at < now - LAST_USED_GRANULARITY:
        ApiToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_GRANULARITY)
        ).update(last_used_at=now)
        token.last_used_at = now
    return token


def token_revoke(token: ApiToken) -> bool:
    """Revoke a token (idempotent). True when this call revoked it."""
    now = timezone.now()
    changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
    if changed:
        token.revoked_at = now
    return bool(changed)


def token_list(user: Any | None = None, *, covered_by: Any | None = None) -> QuerySet[ApiToken]:
    """Tokens, newest first: one user's, or everyone's when `user` is None (admins); with `covered_by`, only
    those of users that user covers (`roles.user_covers`: limited to (cluster, namespace) pairs within its own)."""
    qs = ApiToken.objects.select_related("user").order_by("-id")
    if user is not None:
        qs = qs.filter(user=user)
    limit = user_namespaces(covered_by) if covered_by is not None else None
    if limit is not None:
        granted = NamespaceGrant.objects.values("user")
        outside = NamespaceGrant.objects.exclude(scope_q(limit)).values("user")  # a grant the limit lacks
        qs = qs.filter(user__is_superuser=False, user__in=granted).exclude(user__in=outside)
    return qs
