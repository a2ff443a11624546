"""The overview (narrowed to the clusters the navigation's picker chose, `opsconsole.console.clusters`): the clusters
(resources by phase and connection health per cluster, and the total); each kind's state machine with counts, edge
counts and dwell medians (the kinds with activity first, the quiet ones folded); recent transitions; the reconcile
charts over a window the reader picks (`?window=`); the engine strip (the queue, the controller's leader, or each
cluster's leader as its controller reports it when several clusters are registered, the workers alive, the healing
counts: anomalous, suspended, rolling back, escalated) and the anomalies by kind and rule."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.charts import WINDOWS, overview_charts, window_get
from opsconsole.console.clusters import ClusterChoice, cluster_choice
from opsconsole.console.diagrams import state_machine_svg
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.services.healing import healing_overview
from reconcilers.services.selectors import aggregates, kinds, liveness, queue, shards, stats, transitions
from reconcilers.services.selectors.cluster_health import REMOVED, UNREACHABLE, ClusterHealth, cluster_health

FRAGMENTS = {
    "machines": "console/_overview_machines.html",
    "recent": "console/_overview_recent.html",
    "engine": "console/_overview_engine.html",
    "charts": "console/_overview_charts.html",
    "healing": "console/_overview_healing.html",
    "clusters": "console/_overview_clusters.html",
}


def _machines(namespaces: frozenset[str] | None, keep: dict[str, str] | None = None) -> list[dict[str, Any]]:
    counts = stats.phase_counts(namespaces=namespaces)
    recorded = aggregates.resource_counts(namespaces=namespaces, deleted=None, fold_first=False)  # deleted too
    kind_list = kinds.kind_list()
    figures = stats.machine_figures({k["kind"]: k["state_machine"]["states"] for k in kind_list},
                                    namespaces=namespaces)
    out: list[dict[str, Any]] = []
    for k in kind_list:
        kind = k["kind"]
        per_state = dict(counts.get(kind, {}))
        total = sum(per_state.values())  # live resources
        for state in k["state_machine"]["terminal"]:  # Deleted: every resource recorded there, deleted ones too
            per_state[state] = recorded.get((kind, k["group"], state), 0)

        def href(state: str, kind: str = kind) -> str:
            return reverse("console:resources") + "?" + urlencode({**(keep or {}), "kind": kind, "phase": state})

        svg = state_machine_svg(
            k["state_machine"], counts=per_state,
            hour=figures[kind]["hour"], day=figures[kind]["day"], dwell=figures[kind]["dwell"],
            dwell_now=stats.phase_dwell_now(kind, namespaces=namespaces),
            state_href=href, label=kind,
        )
        out.append({"kind": kind, "info": k, "svg": svg, "total": total,
                    "unphased": per_state.get("", 0), "moves_hour": sum(figures[kind]["hour"].values()),
                    "moves_day": sum(figures[kind]["day"].values())})
    return machines_ordered(out)


def machines_ordered(machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kinds with activity first (transitions in the last hour, then the last day, most first), then the rest
    in registration order, each marked `shown` or folded: shown are those with activity; when no kind has any,
    those with resources; when none has resources either, every kind (the page would be empty otherwise)."""
    ordered = sorted(machines, key=lambda m: (-m["moves_hour"], -m["moves_day"]))  # stable: the rest keep order
    for wanted in (lambda m: m["moves_day"] > 0, lambda m: m["total"] > 0, lambda m: True):
        if any(wanted(m) for m in ordered):
            for m in ordered:
                m["shown"] = bool(wanted(m))
            break
    return ordered


def _href(name: str, query: str = "") -> str:
    """The URL of a console page, or '' when it does not exist (yet)."""
    try:
        return reverse(name) + query
    except NoReverseMatch:
        return ""


def cluster_leaders(choice: ClusterChoice) -> list[ClusterHealth] | None:
    """Each shown cluster's controller leader and last report (from its Cluster row, as its controller reports
    them), when clusters other than the default one are registered and visible; None otherwise (the strip then
    reads the default cluster's leader Lease)."""
    if not any(c.name != DEFAULT_CLUSTER for c in choice.clusters):
        return None
    return [cluster_health(c) for c in choice.clusters if choice.chosen is None or c.name in choice.chosen]


def _engine(namespaces: frozenset[str] | None, healing: dict[str, Any], choice: ClusterChoice) -> dict[str, object]:
    """The strip across the top: queue, leader (or each cluster's, `cluster_leaders`), the controller shards (when
    sharded), workers alive, anomalies (each with the page it links to, keeping the cluster `choice`)."""
    leaders, keep = cluster_leaders(choice), choice.query
    try:
        snap = queue.queue_snapshot(namespaces=namespaces, limit=0, clusters=choice.only)  # as the queue page
        q = {"depth": snap["depth"], "processing": snap["processing_count"], "delayed": snap["delayed_count"],
             "error": ""}
    except Exception as exc:  # Redis down: the page says so
        q = {"depth": None, "processing": None, "delayed": None, "error": f"Redis did not answer: {type(exc).__name__}"}
    anomalies = [
        {"key": key, "label": label, "count": healing.get(key, 0), "css": css,
         "href": _href("console:resources", "?" + urlencode({**choice.params, "healing": key}))}
        for key, label, css in (("anomalous", "anomalous", "healing-anomalous"),
                                ("suspended", "suspended", "healing-suspended"),
                                ("rolling_back", "rolling back", "healing-rolling-back"),
                                ("escalated", "escalated", "healing-escalated"))
    ]
    return {"queue": q, "leader": liveness.controller_leader() if leaders is None else None,
            "cluster_leaders": leaders, "workers": liveness.workers_alive(), "shards": shards.controller_shards(),
            "queue_href": _href("console:queue", keep), "workers_href": _href("console:workers", keep),
            "anomalies": anomalies, "healing_error": healing.get("error", "")}


def _clusters(choice: ClusterChoice, limit: frozenset[str] | None) -> dict[str, Any]:
    """The clusters strip: per cluster shown, its live resources by phase (one read of the maintained counts) and
    its connection health; and the phases of them all."""
    counts = aggregates.cluster_phase_counts(namespaces=limit, clusters=choice.chosen)
    rows: list[ClusterHealth] = [cluster_health(c, counts.get(c.name)) for c in choice.clusters
                                 if choice.chosen is None or c.name in choice.chosen]
    phases = sorted({p for per in counts.values() for p in per}, key=lambda p: (p == "", p))
    total = {p: sum(per.get(p, 0) for per in counts.values()) for p in phases}
    return {"rows": rows, "phases": phases, "total": total, "sum": sum(total.values()), "many": len(rows) > 1,
            "shown": choice.many or any(r.state in (UNREACHABLE, REMOVED) for r in rows)}


@console_page
def overview(request: HttpRequest) -> HttpResponse:
    """The landing page (`?window=15m|1h|24h` picks the charts' window; anything else: 1 h; `?cluster=` and
    `?cluster_label=` narrow it)."""
    choice = cluster_choice(request)
    limit = user_namespaces(request.user)
    namespaces = choice.narrow(limit)
    wanted = set(request.GET.get("_live", "").split(",")) if request.GET.get("_live") else set(FRAGMENTS)
    window = window_get(request.GET.get("window"))
    context: dict[str, object] = {
        "window": window, "picker": choice, "cluster_errors": choice.errors,
        "windows": [{"key": w.key, "label": w.label, "current": w.key == window.key} for w in WINDOWS.values()],
    }
    healing = healing_overview(namespaces) if wanted & {"engine", "healing"} else {}
    if "clusters" in wanted:
        context["clusters"] = _clusters(choice, limit)
    if "machines" in wanted:
        context["machines"] = _machines(namespaces, choice.params)
        context["machines_folded"] = sum(1 for m in context["machines"] if not m["shown"])
    if "recent" in wanted:
        context["recent"] = list(transitions.transition_list(namespaces=namespaces).order_by("-id")[:15])
    if "engine" in wanted:
        context["engine"] = _engine(limit, healing, choice)  # the queue's keys by their prefix, as the queue page
    if "charts" in wanted:
        context["charts"] = overview_charts(window=window, namespaces=namespaces)
    if "healing" in wanted:
        context["healing"] = healing
    return page(request, "console/overview.html", context, FRAGMENTS)
