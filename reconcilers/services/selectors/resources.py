"""Reads of the Resource mirror: the filtered list (kind, namespace, phase, label selector, name search,
stuck, generation lag, cluster), one resource, its children, transitions, reconcile runs and the Kubernetes Events
archived about it and its descendants."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Max, Q, QuerySet
from django.utils import timezone

from reconcilers.engine import apiclient, kube, registry
from reconcilers.models import KubeEvent, ReconcileRun, Resource, Transition
from reconcilers.services.selectors.cluster_filters import cluster_filter_q
from reconcilers.services.selectors.filters import InvalidFilter, label_selector_q, namespace_q, nul_free

log = logging.getLogger(__name__)
#: the Event types a reader may filter by
EVENT_TYPES = ("Normal", "Warning")


@dataclass(frozen=True)
class ResourceFilters:
    """What a resource list may be filtered by (every field optional)."""

    kind: str = ""
    namespace: str = ""
    phase: str = ""
    selector: str = ""
    search: str = ""
    stuck_for: float | None = None  # seconds in a non-terminal phase
    generation_lag: bool | None = None  # observedGeneration < generation (or never observed)
    include_deleted: bool = False
    healing: str = ""  # anomalous / suspended / rolling_back / escalated (HEALING_STATES)
    anomaly: str = ""  # an anomaly rule matching now (e.g. backoff)
    cluster: str = ""  # one cluster (`cluster_filters`)
    cluster_label: str = ""  # the clusters whose labels match this selector (`env=prod`)


#: the healing states a resource list may be filtered by, and what each means
HEALING_STATES: dict[str, Q] = {
    "anomalous": ~Q(active_anomalies={}),
    "suspended": Q(suspended=True),
    "rolling_back": Q(rollback__state="in_progress"),
    "escalated": Q(rollback__state__in=["failed", "refused"]),
}


#: the longest "stuck for" asked (ten years, as the API's bound): beyond it a date is out of range
STUCK_FOR_MAX = 10 * 365 * 86400.0


def kind_names(kind: str) -> tuple[str, str | None]:
    """The Kind a user named (kind, plural or plural.group, case-insensitive) and its API group (None when
    no registered reconciler matches: the name is then used as given)."""
    try:
        rec = registry.for_name(kind)
    except registry.UnknownKind:
        return kind, None
    return rec.resource.kind, rec.resource.group


def _stuck_q(seconds: float) -> Q:
    cutoff = timezone.now() - timedelta(seconds=seconds)
    q = Q(phase_since__lt=cutoff) & ~Q(phase="")
    terminal = Q()
    for rec in registry.registered():
        ends = sorted(rec.state_machine.terminal)
        if ends:
            terminal |= Q(kind=rec.resource.kind, group=rec.resource.group, phase__in=ends)
    return q & ~terminal if terminal else q


def resource_list(
    filters: ResourceFilters | None = None, *, namespaces: frozenset[str] | None = None
) -> QuerySet[Resource]:
    """Mirrored resources matching `filters`, limited to `namespaces`; not ordered (the paginator orders)."""
    f = filters or ResourceFilters()
    nul_free(**{k: v for k, v in asdict(f).items() if isinstance(v, str)})
    qs = Resource.objects.filter(namespace_q(namespaces), cluster_filter_q(f.cluster, f.cluster_label))
    if not f.include_deleted:
        qs = qs.filter(deleted=False)
    if f.kind:
        kind, group = kind_names(f.kind)
        qs = qs.filter(kind=kind) if group is None else qs.filter(kind=kind, group=group)
    if f.namespace:
        qs = qs.filter(namespace=f.namespace)
    if f.phase:
        qs = qs.filter(phase=f.phase)
    if f.selector:
        qs = qs.filter(label_selector_q(f.selector))
    if f.search:
        qs = qs.filter(name__icontains=f.search)
    if f.stuck_for is not None:
        if not math.isfinite(f.stuck_for) or not 0 <= f.stuck_for <= STUCK_FOR_MAX:
            raise InvalidFilter("stuck_for", f"must be from 0 to {STUCK_FOR_MAX:.0f} seconds")
        qs = qs.filter(_stuck_q(f.stuck_for))
    if f.generation_lag is not None:
        lagging = Q(observed_generation__isnull=True) | Q(observed_generation__lt=F("generation"))
        qs = qs.filter(lagging) if f.generation_lag else qs.exclude(lagging)
    if f.healing:
        if f.healing not in HEALING_STATES:
            raise InvalidFilter("healing", f"must be one of {', '.join(HEALING_STATES)}")
        qs = qs.filter(HEALING_STATES[f.healing])
    if f.anomaly:
        qs = qs.filter(active_anomalies__has_key=f.anomaly)
    return qs


def resource_get(pk: int, *, namespaces: frozenset[str] | None = None) -> Resource:
    """One resource by id, if visible (Resource.DoesNotExist otherwise: an invisible one does not exist)."""
    return Resource.objects.filter(namespace_q(namespaces)).get(pk=pk)


def mirrored_child_kinds() -> list[str]:
    """The registered Kinds that another registered reconciler owns (only those can be mirrored children)."""
    registered = registry.registered()
    mirrored = {(rec.resource.group, rec.resource.plural): rec.resource.kind for rec in registered}
    return sorted({mirrored[(o.group, o.plural)] for rec in registered for o in rec.owns
                   if (o.group, o.plural) in mirrored})


def resource_children_map(resources: list[Resource]) -> dict[str, list[dict[str, Any]]]:
    """For a page of resources: their mirrored children (resources whose controller owner is one of them),
    by owner uid, in one query."""
    uids = [r.uid for r in resources]
    child_kinds = mirrored_child_kinds()
    if not uids or not child_kinds:  # no registered kind is owned by another: the mirror holds no children
        return {uid: [] for uid in uids}
    out: dict[str, list[dict[str, Any]]] = {uid: [] for uid in uids}
    rows = Resource.objects.filter(kind__in=child_kinds, owner__uid__in=uids, deleted=False).values(
        "id", "kind", "namespace", "name", "phase", "owner"
    )
    for row in rows.order_by("id"):
        owner = row.pop("owner") or {}
        if owner.get("uid") in out:
            out[owner["uid"]].append(row)
    return out


def resource_live_children(resource: Resource) -> tuple[list[dict[str, Any]], str]:
    """The objects the resource owns in the cluster (its reconciler's `owns` kinds, by ownerReference uid),
    read live: (children, error). Unreachable API or unknown kind: what was found and the error."""
    try:
        rec = registry.for_kind(resource.group, resource.plural)
    except registry.UnknownKind:
        return [], ""
    children: list[dict[str, Any]] = []
    try:
        api = apiclient.get_api_client(resource.cluster)
        for kind in rec.owns:
            ns = resource.namespace or None
            for item in kube.list_objects(api, kind, ns if kind.namespaced else None, timeout=(2.0, 5.0)).items:
                meta = item.get("metadata") or {}
                if any(ref.get("uid") == resource.uid for ref in meta.get("ownerReferences") or []):
                    children.append({"apiVersion": kind.api_version, "kind": kind.kind,
                                     "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
                                     "uid": meta.get("uid", "")})
    except Exception as exc:  # a read for display: report, never fail the page
        log.info("live children of %s not read: %s", resource, exc)
        return children, f"the Kubernetes API did not answer: {exc}"
    return children, ""


def resource_transitions(resource: Resource) -> QuerySet[Transition]:
    """The resource's transitions (its audit chain)."""
    return Transition.objects.filter(resource=resource)


def resource_runs(resource: Resource) -> QuerySet[ReconcileRun]:
    """The resource's reconcile runs."""
    return ReconcileRun.objects.filter(Q(resource=resource) | Q(resource__isnull=True, key=resource.key))


def resource_events(resource: Resource, *, limit: int = 200, event_type: str = "",
                    since: datetime | None = None) -> list[dict[str, Any]]:
    """The Kubernetes Events archived about the resource and its descendants (the controller's archive, so an Event
    expired or deleted from Kubernetes is still here), one entry per Event with its latest count, the most recently
    seen first, at most `limit`; only those of `event_type` (Normal, Warning) and seen at or after `since`, when
    given. Reads the database only."""
    latest = (KubeEvent.objects.filter(resource=resource).values("event_uid").annotate(top=Max("id"))
              .values("top"))
    qs = KubeEvent.objects.filter(id__in=latest)
    if event_type:
        qs = qs.filter(type=event_type)
    if since is not None:
        qs = qs.filter(last_timestamp__gte=since)
    rows = qs.order_by(F("last_timestamp").desc(nulls_last=True), "-id")[:max(0, limit)]
    return [{
        "type": row.type, "reason": row.reason, "message": row.message, "count": row.count,
        "first_timestamp": row.first_timestamp, "last_timestamp": row.last_timestamp, "source": row.source,
        "name": row.name, "namespace": row.namespace, "involved_kind": row.involved_kind,
        "involved_namespace": row.involved_namespace, "involved_name": row.involved_name,
        "involved_api_version": row.involved_api_version, "own": row.involved_uid == resource.uid,
    } for row in rows]
