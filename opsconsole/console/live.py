"""Rendering a page or, for the live poller, only some of its fragments.

A page names its live fragments (`{name: template}`); the full page includes them inside
`<div data-live="name">`. A request with `?_live=a,b` answers JSON `{"fragments": {"a": "<html>", ...}}`
rendered from the same context, so the browser swaps them in without a reload (static/js/console.js polls, one
request per page per tick for all of its fragments: a burst of changes between ticks is one update)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string

from opsconsole.console.access import me
from opsconsole.console.clusters import cluster_choice


def page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    fragments: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or the asked-for fragments as JSON when `?_live=` names some."""
    context = {**context, "me": me(request)}
    wanted = [n for n in request.GET.get("_live", "").split(",") if n]
    if wanted and fragments:
        out = {name: render_to_string(fragments[name], context, request=request) for name in wanted
               if name in fragments}
        response = JsonResponse({"fragments": out})
        response["Cache-Control"] = "no-store"
        return response
    if getattr(request.user, "is_authenticated", False):
        context.setdefault("picker", cluster_choice(request))  # the navigation's cluster picker
    return render(request, template, context, status=status)
