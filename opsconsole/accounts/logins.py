"""Failed logins (django-axes counts them per username and locks that account out): each failure is recorded as
an `auth.login_failed` action (401) and counted for its address's throttle (`login_throttle`), and each lockout
-- the failure that reaches the limit, and every attempt refused while locked out -- as `auth.locked_out` (429),
with the username tried and the client's address (`client_address`); and how long a lockout has left."""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_cool_off
from axes.models import AccessAttempt
from axes.signals import user_locked_out
from django.contrib.auth.signals import user_login_failed
from django.db.models import Max
from django.dispatch import receiver
from django.utils import timezone

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.client_address import client_address
from opsconsole.accounts.login_throttle import login_address_failed


def _address(request: Any) -> str:
    return (getattr(request, "axes_ip_address", None) or client_address(request) or "") if request else ""


def _username(credentials: dict[str, Any] | None) -> str:
    value = (credentials or {}).get("username", "")
    return value if isinstance(value, str) else ""


@receiver(user_login_failed, dispatch_uid="opsconsole-login-failed")
def _login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    """A wrong password (or unknown user): recorded, unless the attempt was refused by a lockout before the
    password was checked (that one is recorded as auth.locked_out)."""
    if request is None:
        return
    if getattr(request, "axes_locked_out", False) and getattr(request, "axes_failures_since_start", None) is None:
        return
    login_address_failed(_address(request))
    action_record(action="auth.login_failed", method=request.method or "POST", path=request.path, status_code=401,
                  actor=_username(credentials), target=_username(credentials), remote_addr=_address(request),
                  detail={"failures": getattr(request, "axes_failures_since_start", None)})


@receiver(user_locked_out, dispatch_uid="opsconsole-locked-out")
def _locked_out(sender: Any, request: Any = None, username: str | None = None, ip_address: str | None = None,
                **kwargs: Any) -> None:
    """A lockout started, or an attempt was refused during one."""
    if request is None:
        return
    action_record(action="auth.locked_out", method=request.method or "POST", path=request.path, status_code=429,
                  actor=username or "", target=username or "", remote_addr=ip_address or _address(request),
                  detail={"failures": getattr(request, "axes_failures_since_start", None),
                          "minutes_left": lockout_minutes_left(request, username or "")})


def lockout_minutes_left(request: Any, username: str) -> int:
    """Whole minutes (at least 1) until the lockout of this username ends: its newest counted failure plus the
    cool-off time."""
    cool_off = get_cool_off(request)
    if not cool_off:
        return 1
    newest = AccessAttempt.objects.filter(username=username).aggregate(t=Max("attempt_time"))["t"] \
        if username else None
    if newest is None:
        return math.ceil(cool_off.total_seconds() / 60)
    left = (newest + cool_off - timezone.now()).total_seconds()
    return max(1, math.ceil(left / 60))
