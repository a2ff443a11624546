"""One resource: phase, conditions, spec/status YAML, its state machine with the current state and its path, the
transition timeline (its cluster named; an unreachable cluster's object "unknown since …"), the spec revisions (who
changed what, a diff between any two generations), runs, children, Kubernetes Events, and "Reconcile now" with the
request's progress. A deleted object's page is a record: no action forms, and no live refresh (nothing it shows
changes any more)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from opsconsole.accounts.action_records import admission_decisions
from opsconsole.accounts.roles import ADMIN, OPERATOR, user_has_role, user_namespaces
from opsconsole.console.access import Refused, audited_action, resource_for_action
from opsconsole.console.diagrams import state_machine_svg
from opsconsole.console.live import page
from opsconsole.console.rollout import resource_rollout
from opsconsole.console.security import console_action, console_page
from opsconsole.console.views.healing import healing_context
from reconcilers.models import ReconcileRequest, Resource
from reconcilers.services import verbosity
from reconcilers.services.audit_status import audit_chain_status
from reconcilers.services.reconcile_actions import ObjectNotFound, ReconcileRequestError, resource_reconcile
from reconcilers.services.revisions import (
    resource_out_of_band,
    resource_revisions,
    revision_compare,
    revision_compare_default,
)
from reconcilers.services.selectors import health_tree, kinds, resources, runs, stats
from reconcilers.services.selectors.cluster_health import unknown_since

FRAGMENTS = {
    "head": "console/_detail_head.html",
    "machine": "console/_detail_machine.html",
    "timeline": "console/_detail_timeline.html",
    "runs": "console/_detail_runs.html",
    "request": "console/_detail_request.html",
    "revisions": "console/_detail_revisions.html",
    "tree": "console/_detail_tree.html",
    "healing": "console/_detail_healing.html",
    "rollout": "console/_detail_rollout.html",
}


def _get(request: HttpRequest, pk: int) -> Resource:
    try:
        return resources.resource_get(pk, namespaces=user_namespaces(request.user))
    except Resource.DoesNotExist as exc:
        raise Http404("No such resource, or it is outside your namespaces.") from exc


@console_page
def resource_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The detail page (or its live fragments)."""
    obj = _get(request, pk)
    namespaces = user_namespaces(request.user)
    wanted = set(request.GET.get("_live", "").split(",")) if request.GET.get("_live") else None

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    context: dict[str, Any] = {"r": obj}
    if want("head"):  # an unreachable cluster's object: its phase is the last one seen
        context["cluster_unknown_since"] = unknown_since(obj.cluster)
    if want("machine"):
        info = next((k for k in kinds.kind_list() if k["group"] == obj.group and k["plural"] == obj.plural), None)
        steps = [(seq, a, b, at) for seq, a, b, at in reversed(resources.resource_transitions(obj).order_by("-seq")
                 .values_list("seq", "from_phase", "to_phase", "created_at")[:200])]  # the newest 200 steps
        context["machine"] = state_machine_svg(
            info["state_machine"], current=obj.phase, steps=steps, label=obj.kind,
            state_href=lambda s: reverse("console:resources") + "?" + urlencode({"kind": obj.kind, "phase": s}),
        ) if info else None
    if want("timeline"):
        context["timeline"] = list(resources.resource_transitions(obj).order_by("-seq")[:100])
        context["out_of_band"] = resource_out_of_band(obj)
    if want("revisions"):
        context["revisions"] = list(resource_revisions(obj)[:100])
        wanted_from, wanted_to = request.GET.get("from", ""), request.GET.get("to", "")
        context["compare"] = (revision_compare(obj, wanted_from, wanted_to) if wanted_from and wanted_to
                              else revision_compare_default(obj))
        context["compare_missing"] = bool(wanted_from and wanted_to) and context["compare"] is None
    if want("revisions") or want("healing"):  # the Healing panel and the revisions' "Roll back to this"
        context.update(healing_context(obj))
        if obj.deleted:  # nothing to roll back to: a deleted object's page offers no actions
            context["rollback_generations"] = []
    if want("rollout"):  # a stateful kind's ordered upgrade, from its status (None for other kinds)
        context["rollout"] = resource_rollout(obj)
    if want("runs"):
        context["run_groups"] = runs.resource_run_groups(obj, limit=50)  # repeats collapsed into one row
        context["verbose_runs"] = verbosity.verbose_runs([r.pk for g in context["run_groups"] for r in g.runs])
    if want("request"):
        context["requests"] = list(stats.resource_requests(obj, limit=10))
        context["current_request"] = None
        wanted_id = request.GET.get("request", "")
        if wanted_id:
            try:
                context["current_request"] = stats.reconcile_request_visible(wanted_id, namespaces=namespaces)
            except (ReconcileRequest.DoesNotExist, ValidationError, ValueError):
                context["current_request"] = None
    if want("tree"):  # the health tree: one cached LIST per child kind (health_tree)
        context["tree"] = health_tree.resource_tree(obj, namespaces=namespaces)
        context["children"] = resources.resource_children_map([obj]).get(obj.uid, [])
    if wanted is None:
        context.update({"events": resources.resource_events(obj, limit=50),
                        "chain": audit_chain_status(resource_uid=obj.uid)})
        if user_has_role(request.user, ADMIN):  # they name Kubernetes users and groups: admins, as the record
            context["admissions"] = admission_decisions(obj.kind, obj.namespace, obj.name, key=obj.key)
            context["admissions_target"] = obj.key  # the filter finds the older `Kind namespace/name` too
    return page(request, "console/detail.html", context, FRAGMENTS)


@console_action
@require_POST
def resource_reconcile_now(request: HttpRequest, pk: int) -> HttpResponse:
    """"Reconcile now" (operators) through the shared service, recorded; then the detail page follows the
    request until it is handled."""
    reason = request.POST.get("reason", "").strip()[:2000]
    obj = resource_for_action(request, pk)

    def do(detail: dict[str, Any]) -> ReconcileRequest:
        if obj is None:
            raise Refused(404, "No such resource, or it is outside your namespaces.")
        if not reason:
            raise Refused(400, "Give a reason: it is recorded with the request.")
        if "\x00" in reason:
            raise Refused(400, "The reason must not contain NUL characters.")
        try:
            req = resource_reconcile(obj, actor=f"user:{request.user.get_username()}", reason=reason)
        except ObjectNotFound as exc:
            raise Refused(404, f"The object is no longer in the cluster: {exc}") from exc
        except ReconcileRequestError as exc:
            raise Refused(503, str(exc)) from exc
        except Exception as exc:  # the Kubernetes API or Redis did not answer
            raise Refused(503, f"{type(exc).__name__}: {exc}") from exc
        detail.update({"request_id": str(req.pk), "token": req.token})
        return req

    result = audited_action(request, action="resource.reconcile", role=OPERATOR,
                            target=obj.key if obj else f"resource:{pk}", reason=reason, do=do,
                            namespace=obj.namespace if obj else None)
    if result.status >= 400:
        back = reverse("console:resource", args=[pk]) if obj else reverse("console:resources")
        return page(request, "console/refused.html", {"message": result.message, "back": back},
                    status=result.status)
    return redirect(reverse("console:resource", args=[pk]) + "?" + urlencode({"request": str(result.result.pk)})
                    + "#request")
