"""The console's response hardening: a strict Content-Security-Policy (scripts, styles and images only from
this origin; no inline script or style, no plugins, no framing, forms post only here) on every page, applied by
the `console_page` decorator together with the login and role requirements (reading needs the viewer role, as
in the API: a user without a role gets 403), and by `console_action` for the audited actions, whose views check
the role themselves so that a refusal is recorded."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from opsconsole.accounts.roles import user_role
from opsconsole.console.access import me

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


def csp(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Add the Content-Security-Policy (and a no-referrer policy) to the view's responses."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response.setdefault("Content-Security-Policy", CSP)
        response.setdefault("Referrer-Policy", "same-origin")
        return response

    return wrapped


def role_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer 403 to a user without a role (the API's reads need the viewer role too)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if user_role(request.user) is None:
            return render(request, "console/no_role.html", {"me": me(request)}, status=403)
        return view(request, *args, **kwargs)

    return wrapped


def console_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A console page: login and a role required, CSP on the answer."""
    return csp(login_required(role_required(view)))


def console_action(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """An audited console action: login required, CSP on the answer; the view checks the role and records
    the refusal (`opsconsole.console.access.audited_action`)."""
    return csp(login_required(view))
