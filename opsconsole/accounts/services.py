"""Account services: API tokens (created and shown once, stored as sha256, revocable, last-used time) and
the action record.

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
from opsconsole.accounts.targets import target_forms
from reconcilers.core.clusters import DEFAULT_CLUSTER, key_split
from reconcilers.engine.admission import legacy_object_target
from reconcilers.models import ActionRecord, Outcome
from reconcilers.services.selectors.scope import EVERY_CLUSTER, Scope, scope_q

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
    cluster: str = "",
) -> ActionRecord:
    """Append one action to the record; the outcome follows from the HTTP status. Text is stored NUL-free. The
    record's cluster is `cluster`, else the one a target that is a reconcile key names, else the default."""
    return ActionRecord.objects.create(
        cluster=cluster or target_cluster(target),
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


#: a namespace or a name as Kubernetes spells one (anything else cannot be in a target's namespace place)
_DNS_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
#: the actions a user asks through the API or the console (their own record of them, shown to them)
_REQUEST_AUTHS = ("session", "token")


def target_cluster(target: str) -> str:
    """The cluster a target names when it is a reconcile key, or a verbosity scope `object:<key>` (the default
    cluster otherwise)."""
    try:
        return key_split(target.removeprefix("object:"))[0]
    except ValueError:
        return DEFAULT_CLUSTER


def _namespace_forms_q(spaces: list[str], cluster_scope: bool, key_prefix: str) -> Q:
    """Records whose target names one of `spaces` (or, with `cluster_scope`, a cluster-scoped object), a key's
    cluster prefix matching `key_prefix` (a regex: '' for the default cluster's five-part keys)."""
    visible = Q(pk__in=[])
    if spaces:
        alternatives = "|".join(re.escape(ns).replace("\\-", "-") for ns in spaces)
        visible |= Q(target__regex=rf"^{key_prefix}[^/ ]*/[^/ ]+/[^/ ]+/({alternatives})/[^/ ]+$")
        visible |= Q(target__regex=rf"^[A-Z][A-Za-z0-9]* ({alternatives})/[^/ ]+$")
        visible |= Q(target__regex=rf"^kind=.* ns=({alternatives})$")
    if cluster_scope:  # the cluster scope: cluster-scoped objects
        visible |= (Q(target__regex=rf"^{key_prefix}[^/ ]*/[^/ ]+/[^/ ]+//[^/ ]+$")
                    | Q(target__regex=r"^[A-Z][A-Za-z0-9]* [^/ ]+$"))
    return visible


def action_record_visible(namespaces: frozenset[str] | None, username: str) -> Q:
    """Which action records someone limited to `namespaces` (None: not limited; a Scope: by cluster too) may
    read. A target names its namespace in one of three forms: a resource's key `group/version/plural/<ns>/<name>`
    (with its cluster in front outside the default cluster: reconcile, healing and annotation records),
    `Kind <ns>/<name>` (admission decisions, a Kind being CamelCase; `Kind <name>` cluster-scoped) and a bulk
    reconcile's `… ns=<ns>`; a grant of one cluster matches the key's cluster prefix and the record's cluster.
    A record whose target has no namespace (token creations, logins, queue-wide actions, a lookup by an id that
    found nothing one may see) is shown only to unlimited admins, or to the user it concerns: the target
    `user:<username>` or `<username>` (their tokens, their logins), or their own requests through the API or the
    console (whose targets never name an object outside their namespaces)."""
    if namespaces is None:
        return Q()
    pairs = namespaces.pairs if isinstance(namespaces, Scope) else {(EVERY_CLUSTER, ns) for ns in namespaces}
    by_cluster: dict[str, set[str]] = {}
    for cluster, ns in pairs:
        by_cluster.setdefault(cluster, set()).add(ns)
    visible = Q(pk__in=[])
    for cluster, held in sorted(by_cluster.items()):
        spaces = sorted(ns for ns in held if ns and _DNS_RE.match(ns))
        if cluster == EVERY_CLUSTER:
            visible |= _namespace_forms_q(spaces, "" in held, r"(?:[a-z0-9][-a-z0-9]*/)?")
        else:
            prefix = "" if cluster == DEFAULT_CLUSTER else re.escape(cluster).replace("\\-", "-") + "/"
            visible |= Q(cluster=cluster) & _namespace_forms_q(spaces, "" in held, prefix)
    if username:
        visible |= Q(target__in=[f"user:{username}", username]) | Q(actor=username, auth__in=_REQUEST_AUTHS)
    return visible


def action_record_list(
    *, actor: str = "", action: str = "", outcome: str = "", target: str = "", after: datetime | None = None,
    before: datetime | None = None, namespaces: frozenset[str] | None = None, username: str = "",
) -> QuerySet[ActionRecord]:
    """The action record filtered by actor, action, outcome, target (a prefix of an object's key:
    `cache.example.com/v1alpha1/memcacheds/team-a/` is every action about a Memcached in team-a, admission decisions
    about objects that never existed included; the older `Memcached team-a/` form matches the same) and
    time ([after, before)); not ordered. A value holding a NUL matches nothing (no record holds one: they are
    stored NUL-free). With `namespaces` (a reader limited to them) and `username` (the reader), only the records
    `action_record_visible` allows: the one rule for every path that reads the record."""
    qs = ActionRecord.objects.filter(action_record_visible(namespaces, username))
    if any("\x00" in value for value in (actor, action, outcome, target)):
        return qs.none()
    if target:  # either form of an object's name (opsconsole.accounts.targets)
        matches = Q()
        for form in target_forms(target):
            matches |= Q(target__startswith=form)
        qs = qs.filter(matches)
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


def admission_decisions(kind: str, namespace: str, name: str, *, key: str = "",
                        limit: int = 20) -> list[ActionRecord]:
    """The admission webhooks' decisions about one object, newest first: admitted, refused, dry runs, including
    those from before it existed; named by its `key` (as the recorder names its target) or, recorded before
    decisions used the key, `Kind namespace/name`."""
    targets = [legacy_object_target(kind, namespace, name), *([key] if key else [])]
    return list(ActionRecord.objects.filter(action__startswith="admission.", target__in=targets)
                .order_by("-seq")[:limit])
