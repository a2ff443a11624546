"""Who an anomaly may be assigned to: an active user with the operator role (or admin) whose namespaces include the
resource's, so the assignee can see it and resolve it. The engine checks only that the user exists and is active
(`reconcilers.engine.healing.escalation`); the roles are the console's and the API's, checked here."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from opsconsole.accounts.roles import OPERATOR, namespace_allowed, user_has_role
from reconcilers.core.clusters import DEFAULT_CLUSTER


def assignee_refusal(username: str, namespace: str, cluster: str = DEFAULT_CLUSTER) -> str | None:
    """Why `username` cannot be assigned an anomaly of a resource in `namespace` of `cluster`, or None when it
    can."""
    name = (username or "").strip().removeprefix("user:")
    if not name:
        return "name the user to assign it to"
    user = get_user_model().objects.filter(username=name, is_active=True).first()
    if user is None:
        return f"{name!r} is not a known active user"
    if not user_has_role(user, OPERATOR):
        return f"{name!r} does not have the operator role, which resolving needs"
    if not namespace_allowed(user, namespace, cluster):
        where = f" of cluster {cluster}" if cluster != DEFAULT_CLUSTER else ""
        return f"{name!r} cannot see the namespace {namespace or '(cluster scope)'}{where}"
    return None
