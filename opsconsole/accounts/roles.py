"""Roles as Django groups — viewer (read), operator (read + reconcile), admin (everything: other users' tokens,
queue controls) — and namespace limits, by cluster (`user_namespaces`: a `Scope` of (cluster, namespace) pairs).
Superusers are admins without a namespace limit. What an admin does for or to another user (their tokens) stays
within the admin's own namespaces (`user_covers`).

A request made with a role-capped API token carries the cap on its user object (`role_cap_set`); `user_role`, the
one place a role is computed, answers the lower of the held role and the cap for every user, superusers
included, so every check that asks for a role (reads, actions, the action log, token minting) follows it."""

from __future__ import annotations

from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.types import Request
from reconcilers.services.selectors.scope import Scope, scope_allows

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES: tuple[str, ...] = (VIEWER, OPERATOR, ADMIN)
_RANK = {VIEWER: 1, OPERATOR: 2, ADMIN: 3}


def user_role(user: Any) -> str | None:
    """The role the user acts with: the highest role held (superusers: admin), lowered to the cap of the token
    the request came with, if any (None: no role, or not authenticated)."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    return role_min(_held_role(user), getattr(user, "_opsconsole_cap", "") or "")


def _held_role(user: Any) -> str | None:
    if user.is_superuser:
        return ADMIN
    cached = getattr(user, "_opsconsole_role", False)
    if cached is not False:
        return cached
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = max(names, key=_RANK.__getitem__) if names else None
    user._opsconsole_role = role
    return role


def role_cap_set(user: Any, cap: str) -> None:
    """Cap the role `user` (this request's user object) acts with at `cap` ('' caps nothing)."""
    user._opsconsole_cap = cap


def role_above(role: str, other: str | None) -> bool:
    """True when `role` is above `other` (every role is above None, no role)."""
    return other is None or _RANK[role] > _RANK[other]


def user_has_role(user: Any, role: str) -> bool:
    """True when the user's role is `role` or above it."""
    held = user_role(user)
    return held is not None and _RANK[held] >= _RANK[role]


def role_min(held: str | None, cap: str | None) -> str | None:
    """The lower of two roles (None, no role, is the lowest; a cap of None or '' limits nothing)."""
    if not cap or held is None:
        return held
    return held if _RANK[held] <= _RANK[cap] else cap


def user_namespaces(user: Any) -> Scope | None:
    """What the user is limited to: a `Scope` of (cluster, namespace) pairs (cluster '' every cluster, namespace
    '' the cluster scope), or None when not limited. The one place visibility is decided: every read filters by
    it (`namespace_q` / `Scope.q`), every single object is checked by it (`namespace_allowed`)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return Scope(())
    if user.is_superuser:
        return None
    cached = getattr(user, "_opsconsole_namespaces", False)
    if cached is not False:
        return cached
    grants = Scope(user.namespace_grants.values_list("cluster", "namespace"))
    limit = grants if grants.pairs else None
    user._opsconsole_namespaces = limit
    return limit


def namespace_allowed(user: Any, namespace: str, cluster: str = DEFAULT_CLUSTER) -> bool:
    """Whether the user may see and act on objects in `namespace` of `cluster`."""
    return scope_allows(user_namespaces(user), cluster, namespace)


def key_allowed(user: Any, key: str) -> bool:
    """Whether the user may see the object a reconcile key names, in the key's cluster (its prefix); a text that
    is no key only to a user without a limit."""
    try:
        req = Request.from_key(key)
    except ValueError:
        return user_namespaces(user) is None
    return namespace_allowed(user, req.namespace, req.cluster)


def user_covers(user: Any, other: Any) -> bool:
    """Whether `user`'s limit covers all that `other` may see: an unlimited user covers everyone, a limited one
    only users limited to (cluster, namespace) pairs within its own (so that a token made for, or taken from,
    another user never reaches past one's own grant)."""
    mine = user_namespaces(user)
    if mine is None:
        return True
    theirs = user_namespaces(other)
    return theirs is not None and mine.covers(theirs)


def ensure_role_groups(using: str = "default", **_: Any) -> None:
    """The role groups exist (a `post_migrate` receiver, as Django's own permissions are made): the migration
    creates them, and so does every later `migrate` or `flush`, so a database emptied by `flush` keeps its roles."""
    from django.contrib.auth.models import Group

    for name in ROLES:
        Group.objects.using(using).get_or_create(name=name)
