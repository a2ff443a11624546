"""The console's pages for issue 42: one run with its triggers (`runs/<id>/`: why it ran, what it did, links to
its resource, its trace, its transitions and, for a verbose run, its kept log lines) and the kinds' phase
objectives (`slo/`: attainment and burn rate over 1 h, 6 h and 30 d from the record, over the transitions of the
clusters the navigation's picker chose). The detail page's "Why" panel
is `console/_detail_why.html` (its answer from the `why_of` tag)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.clusters import cluster_choice
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.models import ReconcileRun
from reconcilers.services import explain, slo, verbosity


@console_page
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One run, if its resource is visible to the caller (else 404)."""
    try:
        run = explain.run_visible(pk, namespaces=user_namespaces(request.user))
    except ReconcileRun.DoesNotExist as exc:
        raise Http404("No such run, or it is outside your namespaces.") from exc
    return page(request, "console/run.html", {
        "run": run, "triggers": explain.run_triggers(run), "transitions": list(run.transitions.order_by("seq")),
        "log": verbosity.run_lines(run.pk)})


@console_page
def slo_page(request: HttpRequest) -> HttpResponse:
    """Each kind's phase objectives with their attainment and burn rate (over the caller's namespaces, and the
    clusters `?cluster=` / `?cluster_label=` chose)."""
    choice = cluster_choice(request)
    objectives = slo.report(namespaces=user_namespaces(request.user), clusters=choice.only)
    return page(request, "console/slo.html", {"objectives": objectives, "picker": choice,
                                              "cluster_errors": choice.errors})
