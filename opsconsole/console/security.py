"""The console's response hardening: a strict Content-Security-Policy (scripts, styles and images only from
this origin; no inline script or style, no plugins, no framing, forms post only here) on every page, applied by
the `console_page` decorator together with the login requirement."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

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


def console_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A console view: login required, CSP on the answer."""
    return csp(login_required(view))
