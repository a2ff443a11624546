"""Registered clusters as an operator changes them (`manage.py clusters`): their labels, removing one and restoring
it, and the listing (name, server, identity, labels, health state, live resources).

Removing a cluster sets `removed_at` and nothing else: its rows and their history stay as they were (audit chains
included); from then on its controller refuses to start (`engine.clusters.cluster_register`) and a worker fails a
key of it (`apiclient.UnknownCluster`, within the workers' registration cache). Restoring clears `removed_at`. The
`default` cluster is never removed (every key without a cluster prefix is its). A `ClusterAdminError` says what was
refused and carries the HTTP-like status the action record keeps (404 no such cluster, 400 bad input, 409 a
change that cannot be made in the cluster's state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.models import Cluster, Resource
from reconcilers.services.selectors.cluster_health import cluster_state

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY_RE = re.compile(rf"^(?:[a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^(?:{_NAME})?$")


class ClusterAdminError(Exception):
    """A refused change: `status` (404, 400, 409) and the message naming why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ClusterRow:
    """One cluster as `manage.py clusters list` prints it."""

    name: str
    server: str
    identity: str
    labels: dict[str, str]
    state: str  # cluster_health's ok / unreachable / unreported / removed
    since: datetime | None
    resources: int  # live (not deleted) resources on record


def cluster_rows() -> list[ClusterRow]:
    """Every registered cluster (removed ones too), by name, with its live resources counted (one query)."""
    counts = dict(Resource.objects.filter(deleted=False).values("cluster").annotate(n=Count("id"))
                  .values_list("cluster", "n"))
    now = timezone.now()
    rows = []
    for cluster in Cluster.objects.order_by("name"):
        state, since = cluster_state(cluster, now)
        rows.append(ClusterRow(cluster.name, cluster.server, cluster.identity, dict(cluster.labels or {}), state,
                               since, counts.get(cluster.name, 0)))
    return rows


def label_changes(texts: list[str]) -> tuple[dict[str, str], list[str]]:
    """({key: value} to set, [keys] to remove) of `k=v` and `k-` arguments (kubectl label's form); a
    ClusterAdminError (400) naming the first bad one."""
    sets: dict[str, str] = {}
    removes: list[str] = []
    for text in texts:
        if "=" in text:
            key, _, value = text.partition("=")
            if not _KEY_RE.match(key) or not _VALUE_RE.match(value):
                raise ClusterAdminError(400, f"bad label {text!r}: a key is [prefix/]name and a value at most 63 of "
                                             "letters, digits, '-', '_', '.'")
            sets[key] = value
        elif text.endswith("-") and _KEY_RE.match(text[:-1]):
            removes.append(text[:-1])
        else:
            raise ClusterAdminError(400, f"bad label change {text!r}: give key=value to set, key- to remove")
    if both := set(sets) & set(removes):
        raise ClusterAdminError(400, f"label {sorted(both)[0]!r} both set and removed")
    return sets, removes


def _locked(name: str) -> Cluster:
    cluster = Cluster.objects.select_for_update().filter(name=name).first()
    if cluster is None:
        raise ClusterAdminError(404, f"no registered cluster {name!r}")
    return cluster


def cluster_label(name: str, texts: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Set and remove labels of cluster `name` (`k=v`, `k-`): (labels before, labels after)."""
    sets, removes = label_changes(texts)
    with transaction.atomic():
        cluster = _locked(name)
        before = dict(cluster.labels or {})
        after = {k: v for k, v in {**before, **sets}.items() if k not in removes}
        if after != before:
            cluster.labels = after
            cluster.save(update_fields=["labels"])
    return before, after


def cluster_remove(name: str) -> datetime:
    """Mark cluster `name` removed (its history stays): when. Refused (409) for the default cluster and for a
    cluster removed already."""
    if name == DEFAULT_CLUSTER:
        raise ClusterAdminError(409, "the default cluster cannot be removed: every key without a cluster prefix is "
                                     "its")
    with transaction.atomic():
        cluster = _locked(name)
        if cluster.removed_at is not None:
            raise ClusterAdminError(409, f"cluster {name!r} was removed already, at {cluster.removed_at.isoformat()}")
        cluster.removed_at = timezone.now()
        cluster.save(update_fields=["removed_at"])
        return cluster.removed_at


def cluster_restore(name: str) -> datetime:
    """Clear cluster `name`'s removal (its controller may start again): when it had been removed. Refused (409)
    for a cluster that is not removed."""
    with transaction.atomic():
        cluster = _locked(name)
        if cluster.removed_at is None:
            raise ClusterAdminError(409, f"cluster {name!r} is not removed")
        removed_at = cluster.removed_at
        cluster.removed_at = None
        cluster.save(update_fields=["removed_at"])
        return removed_at
