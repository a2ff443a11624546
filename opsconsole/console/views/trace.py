"""One trace in context: the run and resource it belongs to (links back), the run's outcome (a failed run's trace
is marked failed), and the span waterfall under a time axis (tick labels in ms), errors in red with their
exception, each span's attributes in a `<details>`; a link out to Jaeger/Tempo when `OPSCONSOLE_TRACE_UI_URL`
(e.g. `http://jaeger:16686/trace/{trace_id}`) and `OTEL_EXPORTER_OTLP_ENDPOINT` are both set (spans only reach
that UI over OTLP)."""

from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.services.selectors import runs, traces

_TRACE_ID = re.compile(r"^[0-9a-fA-F]{32}$")


def waterfall(spans: list[Any]) -> tuple[list[dict[str, Any]], float]:
    """Rows in tree order (children under their parent, by start), each with depth, offset and width in
    thousandths of the trace's extent; and the extent in ms."""
    if not spans:
        return [], 0.0
    start = min(s.start_time for s in spans)
    end = max(s.end_time for s in spans)
    total_ms = max((end - start).total_seconds() * 1000, 1e-3)
    ids = {s.span_id for s in spans}
    children: dict[str, list[Any]] = {}
    for s in spans:
        children.setdefault(s.parent_span_id if s.parent_span_id in ids else "", []).append(s)
    rows: list[dict[str, Any]] = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda x: x.start_time):
            offset = (s.start_time - start).total_seconds() * 1000
            rows.append({"span": s, "depth": depth, "indent": min(depth, 12) * 14,
                         "x": round(1000 * offset / total_ms, 1),
                         "w": max(2.0, round(1000 * s.duration_ms / total_ms, 1)),
                         "error": s.status_code == "error"})
            walk(s.span_id, depth + 1)

    walk("", 0)
    return rows, total_ms


def time_axis(total_ms: float, *, target: int = 6) -> list[dict[str, Any]]:
    """Ticks for a waterfall `total_ms` wide: a round step (1, 2 or 5 × 10^k ms) giving about `target` ticks, each
    {"pct": position in percent, "label": "20 ms", "anchor": the SVG text-anchor}."""
    if total_ms <= 0:
        return []
    raw = total_ms / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    ticks = []
    for i in range(int(total_ms // step) + 1):
        value = i * step
        pct = round(100 * value / total_ms, 2)
        label = f"{value:.0f} ms" if step >= 1 else f"{value:.{max(0, -math.floor(math.log10(step)))}f} ms"
        ticks.append({"pct": pct, "label": label, "anchor": "start" if i == 0 else "middle"})
    if len(ticks) > 1 and ticks[-1]["pct"] > 92:
        ticks[-1]["anchor"] = "end"
    return ticks


def _exceptions(span: Any) -> list[dict[str, str]]:
    """The exceptions a span recorded (OpenTelemetry's `exception` events): type, message, stack trace."""
    found = []
    for event in span.events or []:
        if isinstance(event, dict) and event.get("name") == "exception":
            attrs = event.get("attributes") or {}
            found.append({"type": str(attrs.get("exception.type", "")),
                          "message": str(attrs.get("exception.message", "")),
                          "stacktrace": str(attrs.get("exception.stacktrace", ""))})
    return found


def trace_ui_url(trace_id: str) -> str:
    """The trace in the external tracing UI, or '' unless a UI URL and an OTLP endpoint are both configured."""
    template = (getattr(settings, "OPSCONSOLE_TRACE_UI_URL", "")
                or getattr(settings, "OPSCONSOLE_TRACE_URL_TEMPLATE", "") or "")  # the older, undocumented name
    if not template or not getattr(settings, "OTEL_EXPORTER_OTLP_ENDPOINT", None):
        return ""
    return template.replace("{trace_id}", trace_id.lower())


def run_span_ms(rows: list[dict[str, Any]]) -> float | None:
    """The duration of the run's own span (`reconcile <Kind>`, which names the run's recorded duration), or None:
    the run's recorded duration ends where its record starts, the span goes on through record, complete, queue."""
    for row in rows:
        attributes = row["span"].attributes
        if isinstance(attributes, dict) and "opsconsole.run.duration_seconds" in attributes:
            return float(row["span"].duration_ms)
    return None


@console_page
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    """The trace page."""
    if not _TRACE_ID.match(trace_id):
        raise Http404("Not a trace id (32 hex digits).")
    try:
        spans = traces.trace_spans(trace_id, namespaces=user_namespaces(request.user))
    except traces.TraceNotVisible as exc:
        raise Http404("No such trace, or it is outside your namespaces.") from exc
    rows, total = waterfall(spans)
    for row in rows:
        row["exceptions"] = _exceptions(row["span"])
    run, resource = runs.trace_run(trace_id, spans) if spans else (None, None)
    root = rows[0]["span"] if rows else None
    outcome = run.result if run is not None else (
        str(root.attributes.get("opsconsole.result", "")) if root is not None and isinstance(root.attributes, dict)
        else "")
    return page(request, "console/trace.html", {
        "trace_id": trace_id.lower(), "rows": rows, "total_ms": total, "ticks": time_axis(total),
        "run_span_ms": run_span_ms(rows),
        "external": trace_ui_url(trace_id), "run": run, "resource": resource, "key": runs.trace_key(spans),
        "outcome": outcome, "failed": outcome == "error", "error_spans": sum(1 for r in rows if r["error"]),
    })
