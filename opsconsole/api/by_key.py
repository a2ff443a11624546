"""The resource endpoints addressed the way Kubernetes names an object, next to the database id:

    /api/v1/kinds/{group}/{kind}/namespaces/{namespace}/{name}[/transitions|/reconciles|/events|/revisions|…]
    /api/v1/kinds/{group}/{kind}/{name}[/…]                     (a cluster-scoped object)
    /api/v1/resources/by-uid/{uid}[/…]
    /api/v1/clusters/{cluster}/kinds/{group}/{kind}/namespaces/{namespace}/{name}[/…]   (in a named cluster)
    /api/v1/clusters/{cluster}/kinds/{group}/{kind}/{name}[/…]

`{kind}` is the Kind (`Memcached`), in any case, or its plural (`memcacheds`); `{group}` the API group (`core`
for the core group). The mirror keeps deleted objects, so several rows may share a key (an object deleted and
re-created under the same name): the key addresses the live one, else the most recently created. The `kinds/…`
addresses without a cluster name an object of the default cluster (what they always named); `clusters/{cluster}/
kinds/…` one of any registered cluster, and a cluster that is not registered, or of which the caller may see
nothing, answers 404 naming it (the same answer for both). A uid names one object in whichever cluster it is.

Each view is the id-addressed one (same serializers, pagination, namespace limits, role checks and action
record) with only the lookup changed. An object outside the caller's namespaces does not exist for them: 404,
also for a reconcile asked by key or uid (the caller named the object; a 403 would confirm that it exists)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from opsconsole.accounts.roles import user_namespaces
from opsconsole.api import actions, reads, revisions
from opsconsole.api.serializers.resources import EventQuerySerializer
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.models import Cluster, Resource
from reconcilers.services.selectors.filters import namespace_q
from reconcilers.services.selectors.resources import kind_names
from reconcilers.services.selectors.scope import Scope

#: the `{group}` that names Kubernetes' core group ('' in the database and in workqueue keys)
CORE_GROUP = "core"
_LIMIT = 253


class ClusterNotFound(Resource.DoesNotExist):
    """The address names a cluster that is not registered, or of which the caller may see nothing."""

    def __init__(self, cluster: str) -> None:
        super().__init__(cluster)
        self.cluster = cluster


def cluster_check(cluster: str, namespaces: frozenset[str] | None) -> str:
    """`cluster` when it is registered and the caller limited to `namespaces` may see something of it;
    ClusterNotFound otherwise."""
    if len(cluster) > 63 or "\x00" in cluster or not Cluster.objects.filter(name=cluster).exists():
        raise ClusterNotFound(cluster)
    if isinstance(namespaces, Scope) and not namespaces.allows_cluster(cluster):
        raise ClusterNotFound(cluster)
    return cluster


def resource_by_key(group: str, kind: str, namespace: str, name: str, *,
                    namespaces: frozenset[str] | None, cluster: str = DEFAULT_CLUSTER) -> Resource:
    """The resource named by its Kubernetes key in `cluster`, if visible: the live row, else the most recently
    created one. Resource.DoesNotExist when there is none (or it is outside `namespaces`)."""
    if any(len(part) > _LIMIT or "\x00" in part for part in (group, kind, namespace, name, cluster)):
        raise Resource.DoesNotExist
    api_group = "" if group == CORE_GROUP else group
    qs = Resource.objects.filter(namespace_q(namespaces), cluster=cluster, group=api_group, namespace=namespace,
                                 name=name)
    registered, registered_group = kind_names(kind)
    if registered_group is not None and registered_group == api_group:
        qs = qs.filter(kind=registered)
    else:
        qs = qs.filter(Q(kind__iexact=kind) | Q(plural__iexact=kind))
    row = qs.order_by("deleted", "-created_at", "-id").first()
    if row is None:
        raise Resource.DoesNotExist
    return row


def resource_by_uid(uid: str, *, namespaces: frozenset[str] | None) -> Resource:
    """The resource with this Kubernetes uid, if visible (Resource.DoesNotExist otherwise)."""
    if len(uid) > 64 or "\x00" in uid:
        raise Resource.DoesNotExist
    return Resource.objects.filter(namespace_q(namespaces)).get(uid=uid)


def resolve(address: dict[str, str], *, namespaces: frozenset[str] | None) -> Resource:
    """The resource a URL's arguments name: `uid`, or `group`, `kind`, `name`, (namespaced) `namespace` and (in a
    named cluster) `cluster` (ClusterNotFound when that cluster is unknown or invisible)."""
    if "uid" in address:
        return resource_by_uid(address["uid"], namespaces=namespaces)
    cluster = cluster_check(address["cluster"], namespaces) if "cluster" in address else DEFAULT_CLUSTER
    return resource_by_key(address["group"], address["kind"], address.get("namespace", ""), address["name"],
                           namespaces=namespaces, cluster=cluster)


def not_found(exc: Exception) -> NotFound:
    """The 404 of an address that found nothing visible: naming the cluster when that is what is unknown."""
    if isinstance(exc, ClusterNotFound):
        return NotFound({"cluster": [f"No such cluster: {exc.cluster[:63]}"]})
    return NotFound("No such object, or it is outside your namespaces.")


_not_found = not_found


class _AddressedMixin:
    """Keep the URL's key arguments aside and hand the id view's handlers nothing (they take `pk`)."""

    kwargs: dict[str, Any]

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.address = {k: str(v) for k, v in kwargs.items()}
        return super().dispatch(request, pk=None)  # type: ignore[misc]


class AddressedAction(_AddressedMixin):
    """An id view's action addressed by the URL's key or uid instead: its `resource()` resolved within the caller's
    namespaces (outside them: 404) and its audit target the address as given until the resource is known."""

    address: dict[str, str]

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "") or ",".join(f"{k}={v}" for k, v in sorted(self.address.items()))

    def resource(self, request: Request, pk: str | None) -> Resource:
        try:
            return resolve(self.address, namespaces=user_namespaces(request.user))
        except Resource.DoesNotExist as exc:
            raise _not_found(exc) from exc


def path_parameters(form: str) -> list[OpenApiParameter]:
    """The URL's path parameters of an addressing form (`FORMS`), described for the schema."""
    names = {"namespaced": ("group", "kind", "namespace", "name"), "cluster": ("group", "kind", "name"),
             "uid": ("uid",), "in_cluster_namespaced": ("cluster", "group", "kind", "namespace", "name"),
             "in_cluster_scoped": ("cluster", "group", "kind", "name")}[form]
    return [OpenApiParameter(n, str, OpenApiParameter.PATH, description=PARAMETERS[n]) for n in names]


class _ResourceByAddress(_AddressedMixin, reads.ResourceViewSet):
    def get_object(self) -> Resource:
        if not hasattr(self, "_object"):
            try:
                self._object = resolve(self.address, namespaces=self.namespaces)
            except Resource.DoesNotExist as exc:
                raise _not_found(exc) from exc
        return self._object


class _ReconcileByAddress(AddressedAction, actions.ResourceReconcileView):
    pass


class _RevisionsByAddress(_AddressedMixin, revisions.ResourceRevisionsView):
    def _resource(self, pk: str | None) -> Resource:
        try:
            return resolve(self.address, namespaces=self.namespaces)
        except Resource.DoesNotExist as exc:
            raise _not_found(exc) from exc


COMPARE = [OpenApiParameter("from", int, description="a generation to compare (with `to`)"),
           OpenApiParameter("to", int, description="another generation")]

FORMS = {
    "namespaced": ("kinds_namespaced", "by Kubernetes key (namespaced)"),
    "cluster": ("kinds_cluster", "by Kubernetes key (cluster-scoped)"),
    "uid": ("resources_by_uid", "by Kubernetes uid"),
    "in_cluster_namespaced": ("clusters_kinds_namespaced", "by cluster and Kubernetes key (namespaced)"),
    "in_cluster_scoped": ("clusters_kinds_cluster", "by cluster and Kubernetes key (cluster-scoped)"),
}


PARAMETERS = {
    "group": "the API group (`cache.example.com`); `core` for Kubernetes' core group",
    "kind": "the Kind (`Memcached`, any case) or its plural (`memcacheds`)",
    "namespace": "the object's namespace",
    "name": "the object's name",
    "uid": "the object's metadata.uid",
    "cluster": "the registered cluster's name (`GET /api/v1/clusters`)",
}
DESCRIPTION = ("The same as the endpoint by database id, addressed {how}. When the mirror holds several rows for "
               "the key (an object deleted and re-created under the same name), the live one is meant, else the "
               "most recently created. An object outside your namespaces answers 404; so does a cluster that is not "
               "registered or of which you may see nothing, naming it.")


def _views(form: str) -> tuple[type, type, type]:
    op, how = FORMS[form]
    common = {"tags": ["resources"], "description": DESCRIPTION.format(how=how), "parameters": path_parameters(form)}
    reads_view = extend_schema_view(
        retrieve=extend_schema(operation_id=f"{op}_retrieve", summary=f"One resource with spec and status, {how}",
                               **common),
        transitions=extend_schema(operation_id=f"{op}_transitions",
                                  summary=f"The resource's transitions (newest first), {how}", **common),
        reconciles=extend_schema(operation_id=f"{op}_reconciles",
                                 summary=f"The resource's reconcile runs (newest first), {how}", **common),
        events=extend_schema(operation_id=f"{op}_events",
                             summary=f"Kubernetes Events about the resource and its descendants, from the archive, "
                                     f"{how}",
                             **{**common, "parameters": [*common["parameters"], EventQuerySerializer]}),
    )(type(f"ResourceBy{form.title()}ViewSet", (_ResourceByAddress,), {"__doc__": f"Resource endpoints {how}."}))
    reconcile_view = extend_schema_view(
        post=extend_schema(operation_id=f"{op}_reconcile", summary=f"Request a reconcile of one resource, {how}",
                           **{**common, "parameters": [*common["parameters"], actions.IDEMPOTENCY_HEADER]}),
    )(type(f"ReconcileBy{form.title()}View", (_ReconcileByAddress,), {"__doc__": f"Reconcile one resource {how}."}))
    revisions_view = extend_schema_view(
        get=extend_schema(operation_id=f"{op}_revisions",
                          summary=f"The resource's spec revisions (newest first), with actor and diff, {how}",
                          **{**common, "parameters": [*common["parameters"], *COMPARE]}),
    )(type(f"RevisionsBy{form.title()}View", (_RevisionsByAddress,), {"__doc__": f"Spec revisions {how}."}))
    return reads_view, reconcile_view, revisions_view


VIEWS = {form: _views(form) for form in FORMS}
