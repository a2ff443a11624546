"""The overview: each kind's state machine with counts, edge counts and dwell medians; recent transitions;
the reconcile charts; the healing counts (anomalies by kind and rule, suspended, rolling back, escalated);
the queue depth, the controller's leader and the workers alive."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.charts import overview_charts
from opsconsole.console.diagrams import state_machine_svg
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.services.healing import healing_overview
from reconcilers.services.selectors import kinds, queue, resources, stats, transitions

FRAGMENTS = {
    "machines": "console/_overview_machines.html",
    "recent": "console/_overview_recent.html",
    "engine": "console/_overview_engine.html",
    "charts": "console/_overview_charts.html",
    "healing": "console/_overview_healing.html",
}


def _machines(namespaces: frozenset[str] | None) -> list[dict[str, object]]:
    counts = stats.phase_counts(namespaces=namespaces)
    kind_list = kinds.kind_list()
    figures = stats.machine_figures({k["kind"]: k["state_machine"]["states"] for k in kind_list},
                                    namespaces=namespaces)
    out = []
    for k in kind_list:
        kind = k["kind"]
        per_state = dict(counts.get(kind, {}))
        total = sum(per_state.values())  # live resources
        for state in k["state_machine"]["terminal"]:  # Deleted: every resource recorded there, deleted ones too
            per_state[state] = resources.resource_list(resources.ResourceFilters(
                kind=f"{k['plural']}.{k['group']}" if k["group"] else k["plural"], phase=state, include_deleted=True),
                namespaces=namespaces).count()

        def href(state: str, kind: str = kind) -> str:
            return reverse("console:resources") + "?" + urlencode({"kind": kind, "phase": state})

        svg = state_machine_svg(
            k["state_machine"], counts=per_state,
            hour=figures[kind]["hour"], day=figures[kind]["day"], dwell=figures[kind]["dwell"],
            state_href=href, label=kind,
        )
        out.append({"kind": kind, "info": k, "svg": svg, "total": total,
                    "unphased": per_state.get("", 0)})
    return out


def _engine(namespaces: frozenset[str] | None) -> dict[str, object]:
    try:
        snap = queue.queue_snapshot(namespaces=namespaces, limit=0)
        q = {"depth": snap["depth"], "processing": snap["processing_count"], "delayed": snap["delayed_count"],
             "error": ""}
    except Exception as exc:  # Redis down: the page says so
        q = {"depth": None, "processing": None, "delayed": None, "error": f"Redis did not answer: {type(exc).__name__}"}
    return {"queue": q, "leader": stats.controller_leader(), "workers": stats.workers_alive()}


@console_page
def overview(request: HttpRequest) -> HttpResponse:
    """The landing page."""
    namespaces = user_namespaces(request.user)
    wanted = set(request.GET.get("_live", "").split(",")) if request.GET.get("_live") else set(FRAGMENTS)
    context: dict[str, object] = {}
    if "machines" in wanted:
        context["machines"] = _machines(namespaces)
    if "recent" in wanted:
        context["recent"] = list(transitions.transition_list(namespaces=namespaces).order_by("-id")[:15])
    if "engine" in wanted:
        context["engine"] = _engine(namespaces)
    if "charts" in wanted:
        context["charts"] = overview_charts(namespaces=namespaces)
    if "healing" in wanted:
        context["healing"] = healing_overview(namespaces)
    return page(request, "console/overview.html", context, FRAGMENTS)
