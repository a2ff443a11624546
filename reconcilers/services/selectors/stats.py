"""Reads behind the console's overview: resources per kind and phase, how many transitions took each edge of
a kind's state machine over a window, the median time spent in a state before leaving it, the manual
requests of a resource, the stored spans of a trace, and the engine's liveness (the controller's leader Lease,
the Celery workers answering a ping), each limited to the caller's namespaces where it reads rows."""

from __future__ import annotations

import logging
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.utils import timezone

from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME
from reconcilers.models import ReconcileRequest, Resource, Span, Transition
from reconcilers.services.selectors.filters import namespace_q

log = logging.getLogger(__name__)
_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()


def _cached(name: str, ttl: float, compute: Any) -> Any:
    """A per-process memo of a slow read (a Lease, a worker ping) for `ttl` seconds."""
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(name)
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
    value = compute()
    with _cache_lock:
        _cache[name] = (time.monotonic(), value)
    return value


def stats_cache_clear() -> None:
    """Forget the memoised engine reads (tests)."""
    with _cache_lock:
        _cache.clear()


def phase_counts(*, namespaces: frozenset[str] | None = None) -> dict[str, dict[str, int]]:
    """Live (not deleted) resources per Kind and phase ('' until the first transition)."""
    rows = (Resource.objects.filter(namespace_q(namespaces), deleted=False).values("kind", "phase")
            .annotate(n=Count("id")).order_by())
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row["kind"], {})[row["phase"]] = row["n"]
    return out


def edge_counts(
    kind: str, since: datetime, *, namespaces: frozenset[str] | None = None
) -> dict[tuple[str, str], int]:
    """Transitions of `kind` recorded at or after `since`, per (from, to) edge."""
    rows = (Transition.objects.filter(namespace_q(namespaces), kind=kind, created_at__gte=since)
            .values("from_phase", "to_phase").annotate(n=Count("id")).order_by())
    return {(r["from_phase"], r["to_phase"]): r["n"] for r in rows}


def state_dwell_medians(
    kind: str, since: datetime, *, namespaces: frozenset[str] | None = None, sample: int = 2000
) -> dict[str, float]:
    """The median seconds a `kind` resource spent in a state before leaving it, per state, over the newest
    `sample` transitions out of it recorded since `since` (each paired with the transition that entered it)."""
    entered = Transition.objects.filter(resource_uid=OuterRef("resource_uid"), seq=OuterRef("seq") - 1)
    rows = (Transition.objects.filter(namespace_q(namespaces), kind=kind, created_at__gte=since, seq__gt=1)
            .annotate(entered_at=Subquery(entered.values("created_at")[:1]))
            .order_by("-id").values_list("from_phase", "created_at", "entered_at")[:sample])
    spans: dict[str, list[float]] = {}
    for phase, left_at, entered_at in rows:
        if entered_at is not None:
            spans.setdefault(phase, []).append(max(0.0, (left_at - entered_at).total_seconds()))
    return {phase: statistics.median(values) for phase, values in spans.items()}


def resource_path(resource: Resource) -> list[tuple[str, str]]:
    """The distinct edges this resource's recorded transitions took, oldest first."""
    seen: dict[tuple[str, str], None] = {}
    for edge in (Transition.objects.filter(resource=resource).order_by("seq")
                 .values_list("from_phase", "to_phase")):
        seen.setdefault(edge, None)
    return list(seen)


def resource_requests(resource: Resource, *, limit: int = 20) -> QuerySet[ReconcileRequest]:
    """The resource's manual reconcile requests, newest first."""
    return (ReconcileRequest.objects.filter(resource=resource).select_related("run")
            .order_by("-requested_at")[:limit])


def reconcile_request_visible(request_id: object, *, namespaces: frozenset[str] | None = None) -> ReconcileRequest:
    """One manual request by id if its resource is visible (ReconcileRequest.DoesNotExist otherwise)."""
    return (ReconcileRequest.objects.select_related("run", "resource")
            .filter(namespace_q(namespaces, column="resource__namespace")).get(pk=request_id))


def trace_spans(trace_id: str, *, limit: int = 2000) -> list[Span]:
    """The stored spans of one trace, in start order."""
    return list(Span.objects.filter(trace_id=trace_id.lower()).order_by("start_time", "id")[:limit])


def controller_leader(*, ttl: float = 5.0) -> dict[str, Any]:
    """The controller's leader Lease: {"holder", "renewed", "expires", "alive", "error"} (memoised `ttl` s)."""

    def read() -> dict[str, Any]:
        namespace = getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default")
        try:
            lease = kube.get_object(kube.get_api_client(), LEASE, namespace, LEASE_NAME, timeout=(1.0, 2.0))
        except Exception as exc:  # a read for display: report, never fail the page
            return {"holder": "", "renewed": None, "expires": None, "alive": False,
                    "error": f"the Kubernetes API did not answer: {type(exc).__name__}"}
        if lease is None:
            return {"holder": "", "renewed": None, "expires": None, "alive": False,
                    "error": "no controller has led yet"}
        spec = lease.get("spec") or {}
        renewed_raw = spec.get("renewTime") or spec.get("acquireTime")
        renewed = datetime.fromisoformat(renewed_raw.replace("Z", "+00:00")) if renewed_raw else None
        expires = renewed + timedelta(seconds=float(spec.get("leaseDurationSeconds") or 15)) if renewed else None
        alive = bool(spec.get("holderIdentity")) and expires is not None and expires > datetime.now(UTC)
        return {"holder": spec.get("holderIdentity") or "", "renewed": renewed, "expires": expires,
                "alive": alive, "error": ""}

    return _cached("leader", ttl, read)


def workers_alive(*, ttl: float = 10.0, timeout: float = 0.3) -> dict[str, Any]:
    """The Celery workers that answer a broadcast ping: {"workers": [names], "error"} (memoised `ttl` s)."""

    def read() -> dict[str, Any]:
        try:
            from opsconsole.celery import app

            replies = app.control.ping(timeout=timeout) or []
        except Exception as exc:  # the broker did not answer
            return {"workers": [], "error": f"the broker did not answer: {type(exc).__name__}"}
        return {"workers": sorted(name for reply in replies for name in reply), "error": ""}

    return _cached("workers", ttl, read)


def recent_window(hours: float) -> datetime:
    """Now minus `hours`."""
    return timezone.now() - timedelta(hours=hours)
