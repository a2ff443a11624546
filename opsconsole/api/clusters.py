"""The registered clusters and their connection health:

    GET /api/v1/clusters              every cluster the caller may see anything of (`cluster_label` filters)
    GET /api/v1/clusters/{cluster}    one of them (404 naming it when it is not registered or not visible)

Each carries its name, server, labels, identity (the kube-system namespace's uid), its health as its controller
reports it (leader, heartbeat, last list, watch lag, API requests and errors, the error rate) with `state` and
`reachable` computed from the heartbeat's age (`cluster_health.cluster_state`), and its live resources per phase
within the caller's grants. The objects of a cluster are under `/api/v1/clusters/{cluster}/kinds/…`
(`opsconsole.api.by_key`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.api import by_key
from opsconsole.api.reads import ERRORS, NamespacedMixin, _query
from reconcilers.models import Cluster, Resource
from reconcilers.services.selectors import aggregates, cluster_health
from reconcilers.services.selectors.filters import InvalidFilter


class ClusterQuerySerializer(serializers.Serializer):
    """Filters of the cluster list."""

    cluster_label = serializers.CharField(required=False, max_length=1024,
                                          help_text="only the clusters whose labels match this label selector "
                                                    "(`env=prod`)")


class ClusterHealthSerializer(serializers.Serializer):
    """A cluster's connection as its controller reports it."""

    state = serializers.ChoiceField(choices=[cluster_health.OK, cluster_health.UNREACHABLE,
                                             cluster_health.UNREPORTED, cluster_health.REMOVED],
                                    help_text="ok; unreachable (lost, or no report for 3 report intervals); "
                                              "unreported (no controller report yet); removed")
    reachable = serializers.BooleanField(allow_null=True,
                                         help_text="the controller reported lately and reaches the API server "
                                                   "(null: no report yet)")
    unknown_since = serializers.DateTimeField(allow_null=True, help_text="since when its objects are unknown "
                                                                         "(unreachable or removed)")
    leader = serializers.CharField(help_text="the controller replica leading it")
    heartbeat_at = serializers.DateTimeField(allow_null=True)
    last_list_at = serializers.DateTimeField(allow_null=True)
    watch_lag_seconds = serializers.FloatField(allow_null=True)
    api_requests = serializers.IntegerField(help_text="API requests in the last report's window")
    api_errors = serializers.IntegerField(help_text="of which failed")
    error_rate = serializers.FloatField(allow_null=True, help_text="api_errors / api_requests (null: no request)")


class ClusterCountsSerializer(serializers.Serializer):
    """Live resources of the cluster within the caller's grants."""

    total = serializers.IntegerField()
    phases = serializers.DictField(child=serializers.IntegerField(), help_text="per phase ('' before the first)")


class ClusterSerializer(serializers.Serializer):
    """One registered cluster."""

    name = serializers.CharField()
    server = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField())
    identity = serializers.CharField(help_text="the uid of its kube-system namespace")
    created_at = serializers.DateTimeField()
    removed_at = serializers.DateTimeField(allow_null=True)
    health = ClusterHealthSerializer()
    resources = ClusterCountsSerializer()


def _payload(cluster: Cluster, phases: dict[str, int]) -> dict[str, Any]:
    health = cluster_health.cluster_health(cluster, phases)
    reachable = None if health.state == cluster_health.UNREPORTED else health.state == cluster_health.OK
    return {
        "name": cluster.name, "server": cluster.server, "labels": dict(cluster.labels or {}),
        "identity": cluster.identity, "created_at": cluster.created_at, "removed_at": cluster.removed_at,
        "health": {"state": health.state, "reachable": reachable, "unknown_since": health.unknown_since,
                   "leader": health.leader, "heartbeat_at": health.heartbeat_at,
                   "last_list_at": health.last_list_at, "watch_lag_seconds": health.watch_lag_seconds,
                   "api_requests": health.api_requests, "api_errors": health.api_errors,
                   "error_rate": health.error_rate},
        "resources": {"total": health.total, "phases": health.phases},
    }


class ClusterListView(NamespacedMixin, APIView):
    """The registered clusters the caller may see anything of, with their health."""

    @extend_schema(summary="Registered clusters with their health and resource counts", tags=["clusters"],
                   operation_id="clusters_list", parameters=[ClusterQuerySerializer],
                   responses={200: ClusterSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        q = _query(ClusterQuerySerializer, request)
        visible = cluster_health.clusters_visible(self.namespaces)
        if q.get("cluster_label", "").strip():
            try:
                labelled = cluster_health.clusters_labelled(q["cluster_label"], visible)
            except InvalidFilter as exc:
                raise InvalidFilter("cluster_label", exc.message) from exc
            visible = [c for c in visible if c.name in labelled]
        counts = aggregates.cluster_phase_counts(namespaces=self.namespaces,
                                                 clusters=frozenset(c.name for c in visible)) if visible else {}
        return Response(ClusterSerializer([_payload(c, counts.get(c.name, {})) for c in visible], many=True).data)


class ClusterDetailView(NamespacedMixin, APIView):
    """One registered cluster with its health."""

    @extend_schema(summary="One registered cluster with its health and resource counts", tags=["clusters"],
                   operation_id="clusters_retrieve",
                   parameters=[OpenApiParameter("cluster", str, OpenApiParameter.PATH,
                                                description=by_key.PARAMETERS["cluster"])],
                   responses={200: ClusterSerializer, **ERRORS})
    def get(self, request: Request, cluster: str) -> Response:
        try:
            name = by_key.cluster_check(cluster, self.namespaces)
        except Resource.DoesNotExist as exc:
            raise by_key.not_found(exc) from exc
        row = Cluster.objects.get(name=name)
        counts = aggregates.cluster_phase_counts(namespaces=self.namespaces, clusters=frozenset({name}))
        return Response(ClusterSerializer(_payload(row, counts.get(name, {}))).data)
