""""Debug logging" on the detail page (an object's runs verbose until an expiry, or off: operators, in the object's
namespace, audited as `verbosity.set` / `verbosity.clear`), the Debug logging page (`/verbosity/`: the settings in
force, and a kind's or every run's verbosity, set or cleared by admins, audited the same way, as the API's
`POST /api/v1/verbosity`) and a run's kept log lines (`/runs/<id>/log/`)."""

from __future__ import annotations

import time
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from opsconsole.accounts.roles import ADMIN, OPERATOR, key_allowed
from opsconsole.console.access import Refused, audited_action, resource_for_action
from opsconsole.console.live import page
from opsconsole.console.security import console_action, console_page
from reconcilers.models import ReconcileRun
from reconcilers.services import verbosity
from reconcilers.services.selectors.kinds import kind_list


@console_action
@require_POST
def resource_verbosity(request: HttpRequest, pk: int) -> HttpResponse:
    """Set (minutes > 0) or clear (0) the object's verbosity."""
    obj = resource_for_action(request, pk)
    modules = request.POST.get("modules", "")[:200]
    minutes = _minutes(request.POST.get("minutes", ""))
    scope = f"object:{obj.key}" if obj is not None else f"resource:{pk}"
    action = "verbosity.clear" if minutes == 0 else "verbosity.set"

    def do(detail: dict[str, Any]) -> Any:
        if obj is None:
            raise Refused(404, "No such resource, or it is outside your namespaces.")
        detail.update({"scope": scope, "modules": modules, "minutes": minutes})
        return _set_or_clear(request, scope, modules, minutes)

    result = audited_action(request, action=action, role=OPERATOR, target=scope, reason="", do=do,
                            namespace=obj.namespace if obj else None)
    if result.status >= 400:
        back = reverse("console:resource", args=[pk]) if obj else reverse("console:resources")
        return page(request, "console/refused.html", {"message": result.message, "back": back},
                    status=result.status)
    return redirect(reverse("console:resource", args=[pk]) + "#verbosity")


@console_page
def run_log(request: HttpRequest, pk: int) -> HttpResponse:
    """The log lines a verbose run kept, within the viewer's namespaces."""
    run = ReconcileRun.objects.filter(pk=pk).first()
    if run is None or not key_allowed(request.user, run.key):
        raise Http404("No such run, or it is outside your namespaces.")
    return page(request, "console/run_log.html", {"run": run, "log": verbosity.run_lines(run.pk)})


def _set_or_clear(request: HttpRequest, scope: str, modules: str, minutes: int) -> Any:
    """Set (minutes > 0) or clear (0) a scope's verbosity; refusals name the field (Redis away: 503)."""
    if minutes < 0:
        raise Refused(400, f"minutes: a whole number, 0 to {verbosity.MAX_MINUTES}.")
    try:
        if minutes == 0:
            return verbosity.verbosity_clear(scope)
        return verbosity.verbosity_set(scope, modules, minutes, actor=f"user:{request.user.get_username()}")
    except verbosity.VerbosityError as exc:
        raise Refused(400, f"{exc.field}: {exc}") from exc
    except Exception as exc:  # Redis did not answer
        raise Refused(503, f"{type(exc).__name__}: {exc}") from exc


def _minutes(raw: str) -> int:
    """The form's minutes: a whole number, else -1 (refused naming the field)."""
    return int(raw) if raw.isdigit() and len(raw) < 6 else -1


@console_page
def verbosity_page(request: HttpRequest) -> HttpResponse:
    """The settings in force (object ones within the viewer's namespaces) and, for admins, the kind / all form."""
    try:
        found, error = verbosity.verbosity_list(), ""
    except Exception as exc:  # noqa: BLE001 - Redis away: the page says so
        found, error = [], f"{type(exc).__name__}: {exc}"
    shown = []
    for s in found:
        if s.scope.startswith("object:") and not key_allowed(request.user, s.scope.removeprefix("object:")):
            continue
        shown.append({"scope": s.scope, "modules": ", ".join(f"{m}={lv}" for m, lv in s.modules.items()),
                      "minutes_left": max(0, int((s.until - time.time()) // 60) + 1), "actor": s.actor})
    return page(request, "console/verbosity.html", {
        "settings": shown, "error": error, "kinds": [k["kind"] for k in kind_list()],
        "max_minutes": verbosity.MAX_MINUTES})


@console_action
@require_POST
def scoped_verbosity(request: HttpRequest) -> HttpResponse:
    """Set (minutes > 0) or clear (0) a kind's (`kind:<Kind>`) or every run's (`all`) verbosity: admins."""
    scope = request.POST.get("scope", "")[:80]
    modules = request.POST.get("modules", "")[:200]
    minutes = _minutes(request.POST.get("minutes", ""))
    action = "verbosity.clear" if minutes == 0 else "verbosity.set"

    def do(detail: dict[str, Any]) -> Any:
        detail.update({"scope": scope, "modules": modules, "minutes": minutes})
        if scope != "all" and not scope.startswith("kind:"):
            raise Refused(400, "scope: kind:<Kind> or all (an object's is set on its page).")
        return _set_or_clear(request, scope, modules, minutes)

    result = audited_action(request, action=action, role=ADMIN, target=scope, reason="", do=do)
    if result.status >= 400:
        return page(request, "console/refused.html", {"message": result.message,
                                                      "back": reverse("console:verbosity")}, status=result.status)
    return redirect(reverse("console:verbosity"))
