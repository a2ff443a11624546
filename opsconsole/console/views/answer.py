"""The answer of a healing form on the detail page: the action run as an audited action (the operator role, the
namespace check, the action record, refused ones included), then back to the Healing panel or the refusal page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from opsconsole.accounts.roles import OPERATOR
from opsconsole.console.access import audited_action
from opsconsole.console.live import page
from reconcilers.models import Resource


def healing_answer(request: HttpRequest, pk: int, obj: Resource | None, *, action: str, reason: str,
                   do: Callable[[dict[str, Any]], Any]) -> HttpResponse:
    """Run one healing form's `do` as an audited action on resource `pk`, then answer (see the module docstring)."""
    result = audited_action(request, action=action, role=OPERATOR, target=obj.key if obj else f"resource:{pk}",
                            reason=reason, do=do, namespace=obj.namespace if obj else None)
    back = reverse("console:resource", args=[pk]) if obj else reverse("console:resources")
    if result.status >= 400:
        return page(request, "console/refused.html", {"message": result.message, "back": back + "#healing"},
                    status=result.status)
    return redirect(back + "#healing")
