"""The cluster filters of the lists (resources, transitions, runs, manual requests): `cluster=<name>` (one
cluster) and `cluster_label=<selector>` (the clusters whose labels match a Kubernetes label selector,
`env=prod`), compiled to a `Q` over a row's cluster column. A bad value raises InvalidFilter naming its field.

A cluster that is not registered, or that the caller may not see, filters to nothing: the list answers empty, the
same answer for both (a filter must not tell which clusters exist). The caller's grants limit the rows anyway
(`Scope`)."""

from __future__ import annotations

from django.db.models import Q

from reconcilers.core.clusters import cluster_name_check
from reconcilers.models import Cluster
from reconcilers.services.selectors.filters import InvalidFilter, label_selector_q, nul_free


def cluster_filter_q(cluster: str = "", cluster_label: str = "", *, column: str = "cluster") -> Q:
    """A Q keeping rows of `cluster` (when given) whose cluster's labels match `cluster_label` (when given), by the
    rows' cluster `column` (`cluster`, or `resource__cluster` through a foreign key)."""
    nul_free(cluster=cluster, cluster_label=cluster_label)
    q = Q()
    if cluster:
        try:
            cluster_name_check(cluster)
        except ValueError as exc:
            raise InvalidFilter("cluster", str(exc)) from exc
        q &= Q(**{column: cluster})
    if cluster_label.strip():
        labelled = Cluster.objects.filter(label_selector_q(cluster_label, field="cluster_label"))
        q &= Q(**{f"{column}__in": list(labelled.values_list("name", flat=True))})
    return q
