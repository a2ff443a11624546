"""One trace's span waterfall (service, name, duration, attributes, errors), from the stored spans, with a link
out to an external tracing UI when `OPSCONSOLE_TRACE_URL_TEMPLATE` (e.g. `https://jaeger/trace/{trace_id}`) is
set."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse

from opsconsole.accounts.roles import user_namespaces
from opsconsole.console.live import page
from opsconsole.console.security import console_page
from reconcilers.services.selectors import stats

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


@console_page
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    """The waterfall page."""
    if not _TRACE_ID.match(trace_id):
        raise Http404("Not a trace id (32 hex digits).")
    try:
        spans = stats.trace_spans(trace_id, namespaces=user_namespaces(request.user))
    except stats.TraceNotVisible as exc:
        raise Http404("No such trace, or it is outside your namespaces.") from exc
    rows, total = waterfall(spans)
    template = getattr(settings, "OPSCONSOLE_TRACE_URL_TEMPLATE", "") or ""
    external = template.replace("{trace_id}", trace_id.lower()) if template else ""
    return page(request, "console/trace.html", {"trace_id": trace_id.lower(), "rows": rows, "total_ms": total,
                                                "external": external})
