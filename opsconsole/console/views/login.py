"""The answer to a login refused because of too many failed attempts (django-axes' AXES_LOCKOUT_CALLABLE): the
login page again, status 429, saying why and for how long."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from opsconsole.accounts.logins import lockout_minutes_left
from opsconsole.console.security import CSP


def login_locked_out(request: HttpRequest, response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """The login page with the lockout's reason (429, Retry-After in seconds)."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    minutes = lockout_minutes_left(request, username if isinstance(username, str) else "")
    form = AuthenticationForm(request, initial={"username": username})
    answer = render(request, "registration/login.html",
                    {"form": form, "next": request.POST.get("next", "") or request.GET.get("next", ""),
                     "locked_out": f"Too many failed attempts; try again in {minutes} "
                                   f"minute{'s' if minutes != 1 else ''}."}, status=429)
    answer["Retry-After"] = str(minutes * 60)
    answer["Content-Security-Policy"] = CSP
    answer["Referrer-Policy"] = "same-origin"
    return answer
