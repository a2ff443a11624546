"""The workers page (Flower's core): each Celery worker with its host, pid, pool, concurrency, the reconcile it
is running (its key linked to the resource), tasks processed, runs and failures of the last hour, last
heartbeat and uptime; runs per minute per worker over the last hour; the workqueue's depth now; the operator
versions that ran in the last hour compared on their runs (`reconcilers.services.selectors.versions`), so that a
canary is promoted on evidence. The runs, the workqueue's depth and the versions' figures are those of the clusters
the navigation's picker chose (the workers themselves serve every cluster)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.clusters import cluster_choice
from opsconsole.console.linechart import line_chart_svg, time_ticks
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.services import workers as workers_service
from reconcilers.services.selectors import queue
from reconcilers.services.selectors.versions import version_comparison

#: the throughput chart's size (SVG user units): one bar per minute
CHART_W, CHART_H = 240, 32


def _bars(per_minute: list[int], peak: int) -> list[dict[str, float]]:
    """SVG bars (x, y, width, height) of a per-minute series, scaled to the page's busiest minute."""
    width = CHART_W / max(1, len(per_minute))
    return [{"x": round(i * width, 2), "w": round(max(0.5, width - 0.5), 2),
             "h": round(CHART_H * n / peak, 2), "y": round(CHART_H - CHART_H * n / peak, 2)}
            for i, n in enumerate(per_minute) if n and peak]


def _context(request: HttpRequest) -> dict[str, Any]:
    namespaces = user_namespaces(request.user)
    choice = cluster_choice(request)
    only = choice.only
    snap = workers_service.workers_snapshot()
    workers = [*snap["workers"], *snap.get("silent", [])]
    counts = workers_service.worker_run_counts(workers, clusters=only)
    keys = {t["key"] for w in workers for t in w["active"] if t["key"]}
    visible = {k for k in keys if queue.key_visible(k, namespaces)}
    ids = queue.resource_ids_by_key(visible)
    rows = []
    for w in workers:
        active = [{**t, "visible": not t["key"] or t["key"] in visible, "resource_id": ids.get(t["key"]),
                   "elsewhere": bool(t["key"]) and not queue.key_in_clusters(t["key"], only)}
                  for t in w["active"]]
        rows.append({**w, "active": active, **counts.get(w["name"], {"runs": 0, "failed": 0})})
    series = workers_service.throughput(workers, clusters=only)
    peak = max((s["peak"] for s in series), default=0)
    for s in series:
        s["bars"] = _bars(s["per_minute"], peak)
    try:
        depth, depth_error = queue.queue_snapshot(namespaces=namespaces, limit=0, clusters=only), ""
        depth_chart = _depth_chart() if namespaces is None and only is None else None  # whole-queue samples
    except Exception as exc:  # Redis down
        depth, depth_error, depth_chart = None, f"Redis did not answer: {type(exc).__name__}", None
    return {"snap": snap, "rows": rows, "series": series, "peak": peak, "depth": depth,
            "depth_error": depth_error, "depth_chart": depth_chart, "window": workers_service.WINDOW_MINUTES,
            "chart_w": CHART_W, "chart_h": CHART_H, "picker": choice, "cluster_errors": choice.errors,
            "clusters_shown": sorted(only or ()),
            "versions": version_comparison(namespaces=namespaces, clusters=only)}


def _depth_chart() -> Any:
    """The workqueue's depth over the last hour (the controller's samples), as a line chart."""
    start, per_minute = queue.queue_depth_history(minutes=workers_service.WINDOW_MINUTES)
    end = start + timedelta(minutes=len(per_minute))
    return line_chart_svg("Workqueue depth", [("keys waiting", per_minute)], window=(start, end),
                          ticks=time_ticks(start, end, timedelta(minutes=15)), unit="keys",
                          description="keys waiting in the workqueue, the largest sample of each minute",
                          chart_id="depth-chart", height=180)


@console_page
def workers_view(request: HttpRequest) -> HttpResponse:
    """The workers now (cached a few seconds) and their last hour."""
    return page(request, "console/workers.html", _context(request))
