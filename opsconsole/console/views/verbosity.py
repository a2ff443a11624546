""""Debug logging" on the detail page (an object's runs verbose until an expiry, or off: operators, in the object's
namespace, audited as `verbosity.set` / `verbosity.clear`) and a run's kept log lines (`/runs/<id>/log/`)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from opsconsole.accounts.roles import OPERATOR, namespace_allowed
from opsconsole.console.access import Refused, audited_action, resource_for_action
from opsconsole.console.live import page
from opsconsole.console.security import console_action, console_page
from reconcilers.models import ReconcileRun
from reconcilers.services import verbosity


@console_action
@require_POST
def resource_verbosity(request: HttpRequest, pk: int) -> HttpResponse:
    """Set (minutes > 0) or clear (0) the object's verbosity."""
    obj = resource_for_action(request, pk)
    modules = request.POST.get("modules", "")[:200]
    raw = request.POST.get("minutes", "")
    minutes = int(raw) if raw.isdigit() and len(raw) < 6 else -1
    scope = f"object:{obj.key}" if obj is not None else f"resource:{pk}"
    action = "verbosity.clear" if minutes == 0 else "verbosity.set"

    def do(detail: dict[str, Any]) -> Any:
        if obj is None:
            raise Refused(404, "No such resource, or it is outside your namespaces.")
        detail.update({"scope": scope, "modules": modules, "minutes": minutes})
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
    namespace = run.key.split("/")[3] if run is not None and run.key.count("/") == 4 else ""
    if run is None or not namespace_allowed(request.user, namespace):
        raise Http404("No such run, or it is outside your namespaces.")
    return page(request, "console/run_log.html", {"run": run, "log": verbosity.run_lines(run.pk)})
