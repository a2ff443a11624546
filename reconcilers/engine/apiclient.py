"""This process's Kubernetes ApiClients, one per cluster, configured from the settings.

`get_api_client()` is the default cluster's, built once per process (a forked worker builds its own: connections
do not survive fork) from `settings.KUBECONFIG` when set (several files joined by ':' are merged, as kubectl's
KUBECONFIG), the in-cluster service account when `KUBERNETES_SERVICE_HOST` is set (inside a Pod), else the
kubeconfig kubesim writes (`settings.KUBESIM_KUBECONFIG`). `get_api_client(cluster)` is another registered
cluster's (`reconcilers.models.Cluster`): the same kubeconfig through the cluster's `context` (docs/operations.md,
"Many clusters"); a cluster that is not registered, was removed or has no context is `UnknownCluster`, so a key
of it never reaches another cluster's API. `reset()` forgets them all (tests that point the settings at another
cluster). The Django-free helpers that use a client are in `reconcilers.engine.kube`.
"""

from __future__ import annotations

import os
import threading
import time

from django.conf import settings
from kubernetes import client as k8s
from kubernetes.config import ConfigException

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine import kube

_shared: dict[tuple[int, str], tuple[k8s.ApiClient, float]] = {}  # (pid, cluster) → client, checked at
#: how long a worker trusts another cluster's registration before it looks again (a removed cluster is refused)
RECHECK_SECONDS = 30.0
_lock = threading.Lock()


class UnknownCluster(LookupError):
    """A key's cluster this process cannot reach: not registered, removed, or registered without a context."""


def kubeconfig_configured() -> str | None:
    """The kubeconfig the settings name (None: the in-cluster service account)."""
    if settings.KUBECONFIG:
        return str(settings.KUBECONFIG)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    return str(settings.KUBESIM_KUBECONFIG)


def cluster_context(cluster: str) -> str:
    """The kubeconfig context of a registered, not removed cluster other than the default; UnknownCluster else."""
    from reconcilers.models import Cluster  # here: apiclient is imported before the apps are ready

    row = Cluster.objects.filter(name=cluster).values("context", "removed_at").first()
    if row is None:
        raise UnknownCluster(f"cluster {cluster!r} is not registered (no controller ever ran for it)")
    if row["removed_at"] is not None:
        raise UnknownCluster(f"cluster {cluster!r} was removed at {row['removed_at'].isoformat()}")
    if not row["context"]:
        raise UnknownCluster(f"cluster {cluster!r} has no kubeconfig context: its controller runs with --context")
    return str(row["context"])


def get_api_client(cluster: str = DEFAULT_CLUSTER) -> k8s.ApiClient:
    """This process's shared ApiClient of `cluster` (see the module docstring). Another cluster's registration is
    looked at again every RECHECK_SECONDS, so a cluster removed meanwhile is refused from then on."""
    pid, now = os.getpid(), time.monotonic()
    with _lock:
        entry = _shared.get((pid, cluster))
        if entry is not None and (cluster == DEFAULT_CLUSTER or now - entry[1] < RECHECK_SECONDS):
            return entry[0]
        if any(p != pid for p, _ in _shared):
            _shared.clear()  # a forked child: the parent's connections are not its own
    context = None if cluster == DEFAULT_CLUSTER else cluster_context(cluster)  # outside the lock: a query
    if entry is not None:  # still registered: the same client
        with _lock:
            _shared[(pid, cluster)] = (entry[0], now)
        return entry[0]
    try:
        built = kube.build_api_client(kubeconfig_configured(), context)
    except (ConfigException, ValueError) as exc:
        if context is None:
            raise
        raise UnknownCluster(f"cluster {cluster!r}: kubeconfig context {context!r} unusable: {exc}") from exc
    with _lock:
        api = _shared.setdefault((pid, cluster), (built, now))[0]
    if api is not built:
        built.close()
    return api


def reset() -> None:
    """Forget the shared clients (the next `get_api_client()` reads the settings again)."""
    with _lock:
        _shared.clear()
