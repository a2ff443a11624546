"""Account services: API tokens (created and shown once, stored as sha256, revocable, last-used time) and
the action record.

A token is `oc_` followed by 43 URL-safe characters (256 bits from `secrets`): with that much entropy a
plain sha256 is the right storage (as GitHub's tokens), so checking one is a single indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from opsconsole.accounts.models import ActionRecord, ApiToken, NamespaceGrant, Outcome
from opsconsole.accounts.roles import user_namespaces

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


def token_create(user: Any, *, name: str, expires_at: datetime | None = None) -> IssuedToken:
    """Create a token for `user`; the returned secret is the only time the token is seen in clear."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=secret[: len(TOKEN_PREFIX) + 6], hash=token_hash(secret), expires_at=expires_at
    )
    return IssuedToken(token, secret)


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
    those of users that user covers (`roles.user_covers`: limited to namespaces within its own)."""
    qs = ApiToken.objects.select_related("user").order_by("-id")
    if user is not None:
        qs = qs.filter(user=user)
    limit = user_namespaces(covered_by) if covered_by is not None else None
    if limit is not None:
        granted = NamespaceGrant.objects.values("user")
        outside = NamespaceGrant.objects.exclude(namespace__in=limit).values("user")
        qs = qs.filter(user__is_superuser=False, user__in=granted).exclude(user__in=outside)
    return qs


def outcome_for_status(status_code: int) -> str:
    """allowed (2xx/3xx), refused (401/403/429), rejected (other 4xx), failed (5xx)."""
    if status_code < 400:
        return Outcome.ALLOWED
    if status_code in (401, 403, 429):
        return Outcome.REFUSED
    if status_code < 500:
        return Outcome.REJECTED
    return Outcome.FAILED


def _storable(value: Any) -> Any:
    """`value` with NUL characters replaced (U+FFFD): PostgreSQL text and jsonb cannot hold them, and an action
    whose input carried one must still be recorded."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    return value


def action_record(
    *,
    action: str,
    method: str,
    path: str,
    status_code: int,
    actor: str = "",
    auth: str = "",
    token_prefix: str = "",
    target: str = "",
    reason: str = "",
    detail: dict[str, Any] | None = None,
    remote_addr: str = "",
) -> ActionRecord:
    """Append one action to the record; the outcome follows from the HTTP status. Text is stored NUL-free."""
    return ActionRecord.objects.create(
        actor=_storable(actor[:150]),
        auth=auth,
        token_prefix=token_prefix,
        action=action,
        method=_storable(method[:8]),
        path=_storable(path[:1024]),
        target=_storable(target[:1024]),
        reason=_storable(reason),
        outcome=outcome_for_status(status_code),
        status_code=status_code,
        detail=_storable(detail or {}),
        remote_addr=_storable(remote_addr[:64]),
    )


def action_record_list(
    *, actor: str = "", action: str = "", outcome: str = "", after: datetime | None = None,
    before: datetime | None = None,
) -> QuerySet[ActionRecord]:
    """The action record filtered by actor, action, outcome and time ([after, before)); not ordered. A value
    holding a NUL matches nothing (no record holds one: they are stored NUL-free)."""
    qs = ActionRecord.objects.all()
    if any("\x00" in value for value in (actor, action, outcome)):
        return qs.none()
    if actor:
        qs = qs.filter(actor=actor)
    if action:
        qs = qs.filter(action=action)
    if outcome:
        qs = qs.filter(outcome=outcome)
    if after is not None:
        qs = qs.filter(created_at__gte=after)
    if before is not None:
        qs = qs.filter(created_at__lt=before)
    return qs
