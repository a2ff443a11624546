"""Who the console's user is (role, namespaces) and how a console action runs: the same role check, the same
namespace limit and the same action record as the API's (`opsconsole.accounts`), so a forged POST from a
viewer is refused with 403 and recorded like an API call would be; an action by id on a resource outside the
user's namespaces is a 404, as in the API (`resource_for_action`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

from opsconsole.accounts.action_records import action_record, target_cluster
from opsconsole.accounts.client_address import client_address
from opsconsole.accounts.roles import ADMIN, OPERATOR, namespace_allowed, user_has_role, user_namespaces, user_role
from reconcilers.models import Resource
from reconcilers.services.selectors.filters import namespace_q


@dataclass
class Me:
    """The logged-in user as the header and the templates see them."""

    username: str
    role: str | None
    namespaces: frozenset[str] | None
    can_reconcile: bool
    is_admin: bool

    @property
    def namespace_label(self) -> str:
        """'all namespaces' or the sorted list (`cluster/namespace` for a grant of one cluster)."""
        if self.namespaces is None:
            return "all namespaces"
        pairs = getattr(self.namespaces, "pairs", None) or {("", ns) for ns in self.namespaces}
        named = sorted((f"{c}/" if c else "") + (ns or "(cluster scope)") for c, ns in pairs)
        return ", ".join(named) or "no namespace"


def me(request: HttpRequest) -> Me:
    """The request's user as `Me`."""
    user = request.user
    return Me(user.get_username(), user_role(user), user_namespaces(user), user_has_role(user, OPERATOR),
              user_has_role(user, ADMIN))


def resource_for_action(request: HttpRequest, pk: int) -> Resource | None:
    """The resource with id `pk` if the user may see it, else None: an action by id on a resource outside the
    user's namespaces answers 404 like one on an id that does not exist (an id must not tell a namespace)."""
    return Resource.objects.filter(pk=pk).filter(namespace_q(user_namespaces(request.user))).first()


class Refused(Exception):
    """The action is not allowed (status 403) or invalid (400/404/409/503): `status` and a message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ActionOutcome:
    """What an audited console action did: the status recorded, the message shown, the service's result."""

    status: int
    message: str
    result: Any = None
    detail: dict[str, Any] = field(default_factory=dict)


def audited_action(
    request: HttpRequest,
    *,
    action: str,
    role: str,
    target: str,
    reason: str,
    do: Callable[[dict[str, Any]], Any],
    namespace: str | None = None,
) -> ActionOutcome:
    """Check the role (and the namespace, when the target has one: in the cluster a key target names), run
    `do(detail)` and append the action record in every case: allowed (202), refused (403) or failed (the
    `Refused` status raised by `do`)."""
    detail: dict[str, Any] = {"via": "console"}
    user = request.user
    if not user_has_role(user, role):
        outcome = ActionOutcome(403, f"This action needs the {role} role (or above).")
    elif namespace is not None and not namespace_allowed(user, namespace, target_cluster(target)):
        outcome = ActionOutcome(403, f"Namespace {namespace or '(cluster scope)'} is outside your namespaces.")
    else:
        try:
            result = do(detail)
            outcome = ActionOutcome(202, "", result)
        except Refused as exc:
            outcome = ActionOutcome(exc.status, exc.message)
    if outcome.status >= 400:
        detail["message"] = outcome.message[:1000]
    outcome.detail = detail
    action_record(
        action=action, method=request.method or "POST", path=request.path, status_code=outcome.status,
        actor=user.get_username() if user.is_authenticated else "", auth="session" if user.is_authenticated else "",
        target=target, reason=reason, detail=detail, remote_addr=client_address(request),
    )
    return outcome

