"""API tokens for people: create one (its secret shown once, on the answer to the POST, never again), list
one's own and revoke them; admins also see and revoke the tokens of the users they cover (limited to
namespaces within their own: `roles.user_covers`), as in the API. Every create and revoke, refused ones too,
is appended to the action record like the API's (`token.create`, `token.revoke`)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from opsconsole.accounts.models import ApiToken
from opsconsole.accounts.roles import ADMIN, ROLES, VIEWER, user_has_role, user_role
from opsconsole.accounts.tokens import (
    IssuedToken,
    TokenError,
    token_create,
    token_expiry_parse,
    token_list,
    token_may_manage,
    token_revoke,
)
from opsconsole.console.access import Refused, audited_action
from opsconsole.console.live import page
from opsconsole.console.security import console_action, console_page

#: what the form offers (the command and the API take any duration)
EXPIRY_CHOICES = [("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days"), ("365d", "1 year"), ("never", "never")]


def _context(request: HttpRequest, *, issued: IssuedToken | None = None, form: dict[str, str] | None = None,
             error: str = "") -> dict[str, Any]:
    user = request.user
    own = list(token_list(user)[:200])
    others: list[ApiToken] = []
    if user_has_role(user, ADMIN):
        others = list(token_list(None, covered_by=user).exclude(user=user)[:500])
    held = user_role(user)
    roles = [r for r in ROLES if user_has_role(user, r)] if held else []
    sections = [{"id": "own", "title": "Your tokens", "tokens": own, "show_owner": False, "note": ""}]
    if user_has_role(user, ADMIN):
        sections.append({"id": "other", "title": "Other users' tokens", "tokens": others, "show_owner": True,
                         "note": "Those of the users whose namespaces lie within yours"})
    return {"sections": sections, "issued": issued, "now": timezone.now(), "expiry_choices": EXPIRY_CHOICES,
            "roles": roles, "form": form or {"expires": "30d"}, "error": error,
            "is_admin": user_has_role(user, ADMIN)}


def _answer(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    response = page(request, "console/tokens.html", context, status=status)
    response["Cache-Control"] = "no-store"  # the page that shows a new secret must not be kept anywhere
    return response


@console_page
def token_page(request: HttpRequest) -> HttpResponse:
    """One's tokens (admins: also those of the users they cover), and the form to create one."""
    return _answer(request, _context(request))


@console_action
@require_POST
def token_create_view(request: HttpRequest) -> HttpResponse:
    """Create a token for oneself; the answer shows it once."""
    form = {k: request.POST.get(k, "")[:1000] for k in ("name", "description", "expires", "role")}

    def do(detail: dict[str, Any]) -> IssuedToken:
        try:
            expiry = token_expiry_parse(form["expires"])
            issued = token_create(request.user, name=form["name"], description=form["description"],
                                  role=form["role"], expires_at=timezone.now() + expiry if expiry else None)
        except TokenError as exc:
            raise Refused(exc.status, exc.message) from exc
        detail.update({"token_id": issued.token.pk, "prefix": issued.token.prefix})
        return issued

    outcome = audited_action(request, action="token.create", role=VIEWER,
                             target=f"user:{request.user.get_username()}", reason="", do=do)
    if outcome.status >= 400:
        return _answer(request, _context(request, form=form, error=outcome.message), status=outcome.status)
    return _answer(request, _context(request, issued=outcome.result), status=201)


@console_action
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one's own token, or (admins) a covered user's."""

    def do(detail: dict[str, Any]) -> bool:
        token = ApiToken.objects.select_related("user").filter(pk=pk).first()
        if token is None or not token_may_manage(request.user, token):
            raise Refused(404, "No such token.")  # another user's token does not exist for whoever may not revoke it
        detail.update({"prefix": token.prefix, "owner": token.user.get_username()})
        return token_revoke(token)

    outcome = audited_action(request, action="token.revoke", role=VIEWER, target=f"token:{pk}", reason="", do=do)
    if outcome.status >= 400:
        messages.error(request, outcome.message)
    elif outcome.result:
        messages.success(request, f"Token {outcome.detail.get('prefix', '')}… revoked.")
    else:
        messages.info(request, "That token was already revoked.")
    return redirect(reverse("console:tokens"))
