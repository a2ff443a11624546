"""The console's cluster picker: which cluster a page is narrowed to (`?cluster=NAME`, kept by the navigation's
links; none is "All clusters") and by which cluster labels (`?cluster_label=env=prod`), among the clusters the
user may see.

A choice narrows a page by narrowing the user's limit: the namespaces the user may see become the (cluster,
namespace) pairs of the chosen clusters (`ClusterChoice.narrow`), so every read a page makes through its
namespace limit (counts, charts, transitions, runs, the resources list) is narrowed without knowing of clusters.
For a user with no limit the pairs are the chosen clusters' namespaces, read from the maintained counts (a small
table), so narrowing costs one cheap query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.db.models import Q
from django.http import HttpRequest

from opsconsole.accounts.roles import user_namespaces
from reconcilers.models import Cluster, ResourceCount, ResourceCountDelta
from reconcilers.services.selectors.cluster_health import clusters_labelled, clusters_visible
from reconcilers.services.selectors.filters import InvalidFilter
from reconcilers.services.selectors.scope import EVERY_CLUSTER, Scope

#: the query parameters of a choice
PARAMS = ("cluster", "cluster_label")


@dataclass
class ClusterChoice:
    """The clusters a page shows: `chosen` None for every cluster the user may see, else those names."""

    clusters: list[Cluster]
    name: str = ""
    labels: str = ""
    chosen: frozenset[str] | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def many(self) -> bool:
        """Whether there is anything to pick: more than one cluster registered that the user may see."""
        return len(self.clusters) > 1

    @property
    def params(self) -> dict[str, str]:
        """The query parameters that keep this choice."""
        return {k: v for k, v in (("cluster", self.name), ("cluster_label", self.labels)) if v}

    @property
    def query(self) -> str:
        """`?cluster=…` (or '') for a link that keeps the choice."""
        return "?" + urlencode(self.params) if self.params else ""

    @property
    def only(self) -> frozenset[str] | None:
        """The chosen clusters as a limit of their own, for reads that filter rows by their cluster column or keys
        by their prefix (the queue, the workers page, the objectives): None when nothing is chosen or every
        cluster the user may see is."""
        if self.chosen is None or (self.chosen and self.chosen >= {c.name for c in self.clusters}):
            return None
        return self.chosen

    def narrow(self, namespaces: frozenset[str] | None) -> frozenset[str] | None:
        """The user's limit `namespaces` narrowed to the chosen clusters (unchanged when none is chosen)."""
        if self.chosen is None:
            return namespaces
        if namespaces is None and self.chosen >= {c.name for c in self.clusters}:
            return None  # an unlimited user chose every registered cluster: nothing to narrow (no join to pay)
        if namespaces is None:
            return Scope((c, ns) for c, ns in _cluster_namespaces(self.chosen))
        pairs = getattr(namespaces, "pairs", None) or {(EVERY_CLUSTER, ns) for ns in namespaces}
        return Scope((c, ns) for given, ns in pairs for c in sorted(self.chosen) if given in (EVERY_CLUSTER, c))


def _cluster_namespaces(clusters: frozenset[str]) -> set[tuple[str, str]]:
    """(cluster, namespace) of every row the maintained counts hold for `clusters` (deleted ones too)."""
    wanted = Q(cluster__in=sorted(clusters))
    pairs: set[tuple[str, str]] = set()
    for model in (ResourceCount, ResourceCountDelta):
        pairs |= set(model.objects.filter(wanted).order_by().values_list("cluster", "namespace").distinct())
    return pairs


def cluster_choice(request: HttpRequest) -> ClusterChoice:
    """The request's choice (computed once per request)."""
    cached = getattr(request, "_opsconsole_cluster_choice", None)
    if cached is not None:
        return cached
    visible = clusters_visible(user_namespaces(request.user))
    names = {c.name for c in visible}
    name = request.GET.get("cluster", "")[:63]
    labels = request.GET.get("cluster_label", "")[:1024]
    choice = ClusterChoice(clusters=visible, name=name, labels=labels)
    chosen: set[str] | None = None
    if name:
        if name not in names:
            choice.errors.append(f"cluster: no cluster named {name!r} that you may see")
        chosen = {name} & names
    if labels:
        try:
            matching = set(clusters_labelled(labels, visible))
        except InvalidFilter as exc:
            choice.errors.append(f"{exc.field}: {exc.message}")
            matching = set()
        chosen = matching if chosen is None else chosen & matching
    choice.chosen = None if chosen is None else frozenset(chosen)
    request._opsconsole_cluster_choice = choice  # type: ignore[attr-defined]
    return choice
