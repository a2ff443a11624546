"""The stored spans of a trace, and the places (cluster, namespace) it belongs to: a caller limited to some
namespaces sees a trace only when every place it belongs to is theirs (`trace_spans`, `TraceNotVisible`).
"""

from __future__ import annotations

from collections.abc import Iterable

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.types import Request
from reconcilers.models import ReconcileRequest, Span
from reconcilers.services.selectors.scope import scope_allows


class TraceNotVisible(LookupError):
    """The trace belongs to a namespace outside the caller's (or to none, and the caller is limited)."""


def _key_place(key: object) -> tuple[str, str] | None:
    if not isinstance(key, str):
        return None
    try:
        req = Request.from_key(key)
    except ValueError:
        return None
    return req.cluster, req.namespace


def trace_places(trace_id: str, spans: Iterable[Span]) -> set[tuple[str, str]]:
    """The (cluster, namespace) places a trace belongs to (namespace '' for cluster-scoped resources): a span
    belongs to its resource's, named by the reconcile span's `opsconsole.namespace` (with `opsconsole.cluster`,
    else the default cluster) / `opsconsole.key` attributes (and the keys its events name), and a trace that
    carried a manual reconcile request belongs to that request's resource's. Empty: the trace is about no
    resource (a page view, a controller's own work)."""
    found: set[tuple[str, str]] = set()
    for span in spans:
        attributes = span.attributes if isinstance(span.attributes, dict) else {}
        if isinstance(attributes.get("opsconsole.namespace"), str):
            cluster = attributes.get("opsconsole.cluster")
            found.add((cluster if isinstance(cluster, str) and cluster else DEFAULT_CLUSTER,
                       attributes["opsconsole.namespace"]))
        for attrs in [attributes, *(e.get("attributes") or {} for e in (span.events or []) if isinstance(e, dict))]:
            place = _key_place(attrs.get("opsconsole.key")) if isinstance(attrs, dict) else None
            if place is not None:
                found.add(place)
    for key in ReconcileRequest.objects.filter(trace_id=trace_id.lower()).values_list("key", flat=True)[:100]:
        place = _key_place(key)
        if place is not None:
            found.add(place)
    return found


def trace_namespaces(trace_id: str, spans: Iterable[Span]) -> set[str]:
    """The namespaces of the places a trace belongs to (`trace_places`)."""
    return {ns for _cluster, ns in trace_places(trace_id, spans)}


def trace_spans(trace_id: str, *, namespaces: frozenset[str] | None = None, limit: int = 2000) -> list[Span]:
    """The stored spans of one trace, in start order. For a caller limited to `namespaces` (a Scope: by cluster
    and namespace), TraceNotVisible unless every place the trace belongs to (`trace_places`) is theirs: a trace
    about no resource, or with no stored span, is visible only to callers with every namespace."""
    spans = list(Span.objects.filter(trace_id=trace_id.lower()).order_by("start_time", "id")[:limit])
    if namespaces is not None:
        belongs = trace_places(trace_id, spans)
        if not belongs or not all(scope_allows(namespaces, c, ns) for c, ns in belongs):
            raise TraceNotVisible(trace_id)
    return spans
