"""A cluster's controller and its `Cluster` row: the registration when it starts, the health it reports.

`cluster_register` is what `runcontroller --cluster NAME` does before anything else: the row of NAME created the
first time (`reconcilers.core.clusters.cluster_name_check`), the identity of the cluster its API client reaches
(`cluster_identity`: the uid of its `kube-system` namespace, which lives as long as the cluster) recorded the first
time and checked every later time, the API server's URL and the kubeconfig context updated. A controller pointed
at another cluster than the one registered under NAME is refused (`ClusterRefused`, naming both identities), as is
one of a removed cluster: it would file that cluster's objects under this name, and its ghost sweep would record
this cluster's objects deleted. A controller that cannot use its API server at start (no answer, or its credentials
refused: 401) records the cluster unreachable before it exits (`cluster_unreachable`), so the console shows it red
rather than as it last was. `cluster_adopt` (`runcontroller --adopt-identity`) is the one way past the identity
check: an operator's statement, on the action record, that the cluster under NAME was rebuilt.

`HealthReporter` is the controller's heartbeat: every `interval` seconds (OPSCONSOLE_CLUSTER_HEALTH_SECONDS, 5)
the replica that leads writes its identity, the time, the last complete list of its informers, the watch lag (how
late its informers' last events arrived, `watch_lag`) and the API requests (and failed ones) since its last report
on the row; when the API server does not answer its probe (the identity read, so credentials it no longer accepts
count too), the replica
recorded as the leader writes since when (`unreachable_since`, cleared when it answers again) and stops
heartbeating, so the console shows the cluster unreachable. A standby writes nothing. It also sets the
`opsconsole_cluster_*` gauges (label `cluster`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from prometheus_client import Gauge

from reconcilers.core.clusters import cluster_name_check
from reconcilers.core.meta import parse_rfc3339
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, kube_rest
from reconcilers.engine.controller.dbconn import close_old_db_connections
from reconcilers.engine.metrics import REST_CLIENT_REQUESTS
from reconcilers.models import Cluster

log = logging.getLogger(__name__)

NAMESPACES = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
#: the namespace whose uid identifies a cluster (every cluster has it, and it lives as long as the cluster)
IDENTITY_NAMESPACE = "kube-system"

CLUSTER_REACHABLE = Gauge("opsconsole_cluster_reachable",
                          "1 while the cluster's API server answers its controller, else 0", ["cluster"])
CLUSTER_HEARTBEAT = Gauge("opsconsole_cluster_heartbeat_timestamp_seconds",
                          "When the cluster's leading controller last reported its health (Unix time)", ["cluster"])
CLUSTER_LAST_LIST = Gauge("opsconsole_cluster_last_list_timestamp_seconds",
                          "When the cluster's controller last began a complete list of its kinds (Unix time)",
                          ["cluster"])


class ClusterRefused(Exception):
    """A controller may not run for this cluster name (another cluster's identity, or a removed cluster)."""


def default_health_seconds() -> float:
    """settings.OPSCONSOLE_CLUSTER_HEALTH_SECONDS (default 5): how often the leading controller reports."""
    return float(getattr(settings, "OPSCONSOLE_CLUSTER_HEALTH_SECONDS", 5.0))


def cluster_identity(api: Any, timeout: float = 10.0) -> str:
    """The uid of the `kube-system` namespace of the cluster `api` reaches; ClusterRefused when it has none."""
    namespace = kube.get_object(api, NAMESPACES, None, IDENTITY_NAMESPACE, timeout=(timeout, timeout))
    uid = str(((namespace or {}).get("metadata") or {}).get("uid") or "")
    if not uid:
        raise ClusterRefused(f"the API server has no {IDENTITY_NAMESPACE} namespace: its identity is unknown")
    return uid


def cluster_register(name: str, *, identity: str, server: str = "", context: str = "") -> Cluster:
    """Register the cluster `name` for a controller that reaches the cluster of `identity` at `server` through
    `context`, and return its row (see the module docstring). ValueError for a bad name; ClusterRefused for another
    cluster's identity or a removed cluster."""
    cluster_name_check(name)
    if not identity:
        raise ValueError("a cluster's identity (its kube-system namespace's uid) is required")
    with transaction.atomic():
        Cluster.objects.get_or_create(name=name, defaults={"identity": identity})
        row = Cluster.objects.select_for_update().get(name=name)
        if row.removed_at is not None:
            raise ClusterRefused(f"cluster {name!r} was removed at {row.removed_at.isoformat()}: a removed cluster's "
                                 "history stays as it was; register it again under another name, or clear its "
                                 "removed_at first")
        if row.identity and row.identity != identity:
            raise ClusterRefused(
                f"cluster {name!r} is registered with identity {row.identity} (its kube-system namespace's uid), but "
                f"the API server at {server or 'the configured address'} is the cluster of identity {identity}: "
                f"this controller points at another cluster; check its kubeconfig context, or give it its own "
                f"--cluster name")
        row.identity, row.server, row.context = identity, server[:1024], context
        row.save(update_fields=["identity", "server", "context"])
    return row


def cluster_adopt(name: str, *, identity: str) -> str | None:
    """Record `identity` as the cluster `name`'s even where another is recorded (`runcontroller --adopt-identity`:
    the cluster was rebuilt, or a sandbox started afresh, and its history in this database is to go on under its
    name); the identity recorded before, None when there was none or it was this one. A removed cluster stays
    refused (`cluster_register`). The caller records the adoption in the action record."""
    cluster_name_check(name)
    if not identity:
        raise ValueError("a cluster's identity (its kube-system namespace's uid) is required")
    with transaction.atomic():
        row = Cluster.objects.select_for_update().filter(name=name).first()
        if row is None or not row.identity or row.identity == identity or row.removed_at is not None:
            return None
        before, row.identity = row.identity, identity
        row.save(update_fields=["identity"])
    log.warning("cluster %s: identity %s adopted in place of %s", name, identity, before)
    return before


#: a heartbeat younger than this many report intervals is a live controller's: a failed start does not overrule it
#: (the console's own staleness rule, reconcilers.services.selectors.cluster_health.STALE_REPORTS)
FRESH_REPORTS = 3


def cluster_unreachable(name: str, *, server: str = "", context: str = "", now: datetime | None = None) -> bool:
    """Record that a controller starting for cluster `name` could not use its API server (at `server`, through
    `context`): `unreachable_since` set, kept when already set. A name never registered gets its row (no identity
    yet: its first controller that gets in records it); a removed cluster, and one whose controller reported within
    FRESH_REPORTS intervals (another replica reaches it), are left as they are. True when it wrote."""
    cluster_name_check(name)
    now = now or timezone.now()
    live = now - timedelta(seconds=FRESH_REPORTS * default_health_seconds())
    Cluster.objects.get_or_create(name=name, defaults={"server": server[:1024], "context": context})
    return bool(Cluster.objects.filter(name=name, removed_at__isnull=True, unreachable_since__isnull=True)
                .filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=live)).update(unreachable_since=now))


def api_server(api: Any) -> str:
    """The API server URL `api` talks to."""
    return str(getattr(api.configuration, "host", "") or "")


def event_delay(arrived: float, obj: dict[str, Any]) -> float | None:
    """How late a watch event arrived: its arrival (Unix time) less the latest write the object shows (its
    creation, deletion or a managedFields entry's time: the API server's clock, whole seconds); None when it shows
    none."""
    meta = obj.get("metadata") or {}
    stamps = [meta.get("creationTimestamp"), meta.get("deletionTimestamp"),
              *((entry or {}).get("time") for entry in meta.get("managedFields") or ())]
    times = [t for t in (parse_rfc3339(s) for s in stamps) if t is not None]
    return max(0.0, arrived - max(times).timestamp()) if times else None


def watch_lag(last_events: Iterable[tuple[float, dict[str, Any]] | None]) -> float | None:
    """The watch lag a report gives: the most any informer's last event was late (`event_delay`); None before any
    event. A rough measure: whole seconds of the API server's clock against this process's."""
    delays = [d for e in last_events if e is not None and (d := event_delay(*e)) is not None]
    return max(delays) if delays else None


def requests_seen(host: str) -> tuple[float, float]:
    """(API requests, of which failed: no answer or a status of 500 or more) counted so far to `host`."""
    total = failed = 0.0
    for metric in REST_CLIENT_REQUESTS.collect():
        for sample in metric.samples:
            if not sample.name.endswith("_total") or sample.labels.get("host") != host:
                continue
            total += sample.value
            code = sample.labels.get("code", "")
            if not code.isdigit() or int(code) >= 500:
                failed += sample.value
    return total, failed


class HealthReporter:
    """The cluster's health on its row, every `interval` seconds while `start`ed (see the module docstring).
    `leading()` and `identity`: the elector's; `listed_at()`: the informers' last complete lists' starts."""

    def __init__(self, api: Any, cluster: str, *, identity: str, leading: Callable[[], bool],
                 listed_at: Callable[[], Iterable[datetime | None]], interval: float | None = None,
                 probe: Callable[[], Any] | None = None,
                 last_events: Callable[[], Iterable[tuple[float, dict[str, Any]] | None]] | None = None) -> None:
        self.api, self.cluster, self.identity, self.leading, self.listed_at = api, cluster, identity, leading, listed_at
        self.last_events = last_events or (lambda: ())
        self.interval = default_health_seconds() if interval is None else interval
        # the identity read, not /version: an API server that answers but refuses the controller's credentials
        # (revoked, expired: 401) is as lost to it as one that does not answer
        self.probe = probe or (lambda: cluster_identity(api, timeout=min(5.0, max(self.interval, 1.0))))
        self.host = kube_rest.api_host(api)
        self._counted = requests_seen(self.host)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reports = 0  # reports written (tests, logs)

    def report(self, now: datetime | None = None) -> bool:
        """One report (see the module docstring); True when it wrote the row."""
        now = now or timezone.now()
        try:
            self.probe()
            reachable = True
        except Exception as exc:
            log.warning("cluster %s: the API server does not answer (%s)", self.cluster, exc)
            reachable = False
        CLUSTER_REACHABLE.labels(self.cluster).set(1 if reachable else 0)
        close_old_db_connections()
        rows = Cluster.objects.filter(name=self.cluster)
        if not reachable:  # only the replica on record as leading says since when (a standby may be cut off alone)
            written = rows.filter(leader=self.identity, unreachable_since__isnull=True).update(unreachable_since=now)
            self.reports += written
            return bool(written)
        if not self.leading():
            return False
        total, failed = requests_seen(self.host)
        counted, self._counted = self._counted, (total, failed)
        lists = [t for t in self.listed_at() if t is not None]
        fields: dict[str, Any] = {"leader": self.identity[:255], "heartbeat_at": now, "unreachable_since": None,
                                  "api_requests": int(max(0.0, total - counted[0])),
                                  "api_errors": int(max(0.0, failed - counted[1]))}
        if (lag := watch_lag(self.last_events())) is not None:
            fields["watch_lag_seconds"] = lag
        if lists:
            fields["last_list_at"] = max(lists)
            CLUSTER_LAST_LIST.labels(self.cluster).set(max(lists).timestamp())
        written = rows.update(**fields)
        CLUSTER_HEARTBEAT.labels(self.cluster).set(now.timestamp())
        self.reports += written
        return bool(written)

    def start(self) -> None:
        """Report every `interval` seconds in a daemon thread until `stop`."""
        self._thread = threading.Thread(target=self._loop, name=f"cluster-health-{self.cluster}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.report()
            except Exception:  # the database away: the next round tries again
                log.warning("cluster %s: health not reported", self.cluster, exc_info=True)

    def stop(self) -> None:
        """End the reports (a stopped controller leads nothing: the heartbeat ages from here)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
