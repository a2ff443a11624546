"""The registered clusters as the console shows them: which a caller may see, which match a label selector, and
each one's connection health read from what its controller reports (`Cluster`'s health fields).

A cluster is *unreachable* when its controller said it lost the API server (`unreachable_since`) or when its last
report is older than STALE_REPORTS report intervals (`report_seconds`) (the controller is gone, or cannot write):
since then, what the mirror holds of its objects is what they were, not what they are, and the console says "unknown
since …" (never "deleted"). A cluster whose controller has not reported yet is `unreported`, not unreachable (an
install whose controller predates the reports keeps its plain pages).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from reconcilers.engine.clusters import default_health_seconds
from reconcilers.models import Cluster
from reconcilers.services.selectors.filters import label_selector_q

#: a cluster whose last report is older than this many intervals is shown unreachable
STALE_REPORTS = 3
OK, UNREACHABLE, UNREPORTED, REMOVED = "ok", "unreachable", "unreported", "removed"


def report_seconds() -> float:
    """The controllers' report interval in seconds (OPSCONSOLE_CLUSTER_HEALTH_SECONDS, as the controller's
    `HealthReporter` reads it)."""
    return default_health_seconds()


@dataclass(frozen=True)
class ClusterHealth:
    """One cluster's connection as the console shows it."""

    name: str
    labels: dict[str, str]
    server: str
    state: str  # OK / UNREACHABLE / UNREPORTED / REMOVED
    unknown_since: datetime | None  # unreachable since (the loss, or the last report)
    leader: str
    heartbeat_at: datetime | None
    last_list_at: datetime | None
    watch_lag_seconds: float | None
    api_requests: int
    api_errors: int
    phases: dict[str, int] = field(default_factory=dict)  # live resources per phase

    @property
    def error_rate(self) -> float | None:
        """The failed share of the last report window's API requests (None without requests)."""
        return self.api_errors / self.api_requests if self.api_requests else None

    @property
    def total(self) -> int:
        return sum(self.phases.values())

    @property
    def label_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))


def cluster_state(cluster: Cluster, now: datetime | None = None) -> tuple[str, datetime | None]:
    """(state, unknown since) of `cluster` at `now`."""
    if cluster.removed_at is not None:
        return REMOVED, cluster.removed_at
    if cluster.unreachable_since is not None:
        return UNREACHABLE, cluster.unreachable_since
    if cluster.heartbeat_at is None:
        return UNREPORTED, None
    now = now or timezone.now()
    if now - cluster.heartbeat_at > timedelta(seconds=STALE_REPORTS * report_seconds()):
        return UNREACHABLE, cluster.heartbeat_at
    return OK, None


def cluster_health(cluster: Cluster, phases: dict[str, int] | None = None, now: datetime | None = None
                   ) -> ClusterHealth:
    """`cluster`'s health row (with its live resources per phase, when counted)."""
    state, since = cluster_state(cluster, now)
    return ClusterHealth(
        name=cluster.name, labels=dict(cluster.labels or {}), server=cluster.server, state=state,
        unknown_since=since, leader=cluster.leader, heartbeat_at=cluster.heartbeat_at,
        last_list_at=cluster.last_list_at, watch_lag_seconds=cluster.watch_lag_seconds,
        api_requests=cluster.api_requests, api_errors=cluster.api_errors, phases=dict(phases or {}))


def cluster_visible(namespaces: frozenset[str] | None, name: str) -> bool:
    """Whether a caller limited to `namespaces` (None: not limited; a Scope: by cluster) may see anything of
    cluster `name`."""
    if namespaces is None:
        return True
    allows_cluster = getattr(namespaces, "allows_cluster", None)  # a Scope of (cluster, namespace) pairs
    if allows_cluster is not None:
        return bool(allows_cluster(name))
    return bool(namespaces)  # plain namespaces: of every cluster


def clusters_visible(namespaces: frozenset[str] | None) -> list[Cluster]:
    """The registered clusters (removed ones last) a caller limited to `namespaces` may see anything of."""
    rows = sorted(Cluster.objects.all(), key=lambda c: (c.removed_at is not None, c.name))
    return [c for c in rows if cluster_visible(namespaces, c.name)]


def clusters_labelled(selector: str, clusters: Iterable[Cluster] | None = None) -> frozenset[str]:
    """The names of the clusters whose labels match the label selector `selector` (`env=prod`); InvalidFilter
    (field `cluster_label`) on bad syntax."""
    q = label_selector_q(selector, field="cluster_label")
    qs = Cluster.objects.filter(q)
    if clusters is not None:
        qs = qs.filter(name__in=[c.name for c in clusters])
    return frozenset(qs.values_list("name", flat=True))


def unknown_since(cluster_name: str) -> datetime | None:
    """Since when what the mirror holds of `cluster_name`'s objects is unknown (its cluster unreachable or removed);
    None while it is reachable, has not reported yet, or is not registered."""
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        return None
    state, since = cluster_state(cluster)
    return since if state in (UNREACHABLE, REMOVED) else None
