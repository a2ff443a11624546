"""The answers to a login refused before its password is checked: the account is locked out after too many
failed attempts (django-axes' AXES_LOCKOUT_CALLABLE), or the client's address tried too many logins
(`LoginAddressThrottleMiddleware`). Either is the login page again, status 429, saying why and for how long, with
Retry-After; the address throttle's refusal is recorded as `auth.throttled`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.client_address import client_address
from opsconsole.accounts.login_throttle import login_address_wait
from opsconsole.accounts.logins import lockout_minutes_left
from opsconsole.console.security import CSP


def _refused(request: HttpRequest, username: str, message: str, retry_after: int) -> HttpResponse:
    form = AuthenticationForm(request, initial={"username": username})
    answer = render(request, "registration/login.html",
                    {"form": form, "next": request.POST.get("next", "") or request.GET.get("next", ""),
                     "locked_out": message}, status=429)
    answer["Retry-After"] = str(retry_after)
    answer["Content-Security-Policy"] = CSP
    answer["Referrer-Policy"] = "same-origin"
    return answer


def login_locked_out(request: HttpRequest, response: HttpResponse | None = None,
                     credentials: dict[str, Any] | None = None) -> HttpResponse:
    """The login page with the lockout's reason (429, Retry-After in seconds)."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    username = username if isinstance(username, str) else ""
    minutes = lockout_minutes_left(request, username)
    return _refused(request, username, f"Too many failed attempts; try again in {minutes} "
                                       f"minute{'s' if minutes != 1 else ''}.", minutes * 60)


class LoginAddressThrottleMiddleware:
    """A login POST (the console's and the Django admin's) from an address over the per-address throttle
    (`opsconsole.accounts.login_throttle`) is answered 429 before any password is checked or any account's
    failures counted, and recorded as `auth.throttled` with the address."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self._paths: frozenset[str] | None = None

    def _login_paths(self) -> frozenset[str]:
        if self._paths is None:
            self._paths = frozenset({reverse("login"), reverse("admin:login")})
        return self._paths

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path in self._login_paths():
            address = client_address(request)
            wait = login_address_wait(address)
            if wait:
                username = request.POST.get("username", "")
                action_record(action="auth.throttled", method="POST", path=request.path, status_code=429,
                              actor=username[:150], target=username[:150], remote_addr=address,
                              detail={"retry_after": wait})
                return _refused(request, username, "Too many failed logins from your address; try again in "
                                                   f"{wait} second{'s' if wait != 1 else ''}.", wait)
        return self.get_response(request)
