"""Read endpoints: declarative viewsets (NetBox's way) over the selectors. Every list is cursor-paginated
in a stable order and limited to the caller's namespaces; invisible objects answer 404."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.accounts.roles import user_namespaces
from opsconsole.api.pagination import IdCursorPagination, NewestFirstPagination
from opsconsole.api.serializers.common import ClusterQuerySerializer, ErrorSerializer
from opsconsole.api.serializers.history import (
    ExportQuerySerializer,
    ReconcileRunSerializer,
    TransitionQuerySerializer,
    TransitionSerializer,
)
from opsconsole.api.serializers.metrics import MetricsQuerySerializer, MetricsSummarySerializer
from opsconsole.api.serializers.reconcile_requests import ReconcileRequestSerializer
from opsconsole.api.serializers.resources import (
    EventListSerializer,
    EventQuerySerializer,
    KindSerializer,
    ResourceDetailSerializer,
    ResourceQuerySerializer,
    ResourceSerializer,
)
from opsconsole.api.serializers.workqueue import QueueSerializer
from reconcilers.models import ReconcileRequest, Resource
from reconcilers.services.metrics_source import metrics_source_for, metrics_summary
from reconcilers.services.selectors import kinds, queue, resources, transitions
from reconcilers.services.selectors.cluster_filters import cluster_filter_q
from reconcilers.services.selectors.filters import namespace_q

ERRORS = {code: OpenApiResponse(ErrorSerializer, description=text) for code, text in (
    (400, "invalid input: `fields` names each bad field"), (401, "not authenticated"),
    (403, "the role or namespace does not allow it"), (404, "not found (or not visible)"),
)}


def _query(serializer_class: type, request: Request) -> dict[str, Any]:
    ser = serializer_class(data=request.query_params)
    ser.is_valid(raise_exception=True)
    return {k: v for k, v in ser.validated_data.items()}


def _not_found(exc: Exception) -> NotFound:
    return NotFound("No such object, or it is outside your namespaces.")


class NamespacedMixin:
    """The caller's namespace limit."""

    request: Request

    @property
    def namespaces(self) -> frozenset[str] | None:
        return user_namespaces(self.request.user)


@extend_schema_view(list=extend_schema(summary="Registered kinds with their state machines",
                                       responses={200: KindSerializer(many=True), **ERRORS}))
class KindViewSet(viewsets.ViewSet):
    """Each registered reconciler's kind, resource and state machine."""

    def list(self, request: Request) -> Response:
        return Response(KindSerializer(kinds.kind_list(), many=True).data)


@extend_schema_view(
    list=extend_schema(summary="Resources", parameters=[ResourceQuerySerializer],
                       responses={200: ResourceSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(summary="One resource with spec and status",
                           responses={200: ResourceDetailSerializer, **ERRORS}),
)
class ResourceViewSet(NamespacedMixin, viewsets.ReadOnlyModelViewSet):
    """Mirrored resources: filter by kind, namespace, phase, label selector, name, stuck, generation lag."""

    serializer_class = ResourceSerializer
    pagination_class = IdCursorPagination
    queryset = Resource.objects.none()

    def get_queryset(self) -> Any:
        if self.action == "list":
            q = _query(ResourceQuerySerializer, self.request)
            return resources.resource_list(resources.ResourceFilters(**q), namespaces=self.namespaces)
        return Resource.objects.filter(namespace_q(self.namespaces))

    def get_object(self) -> Resource:
        try:
            pk = int(self.kwargs["pk"])
            return resources.resource_get(pk, namespaces=self.namespaces)
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise _not_found(exc) from exc

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        context = {**self.get_serializer_context(), "now": timezone.now(),
                   "children": resources.resource_children_map(page)}
        return self.get_paginated_response(ResourceSerializer(page, many=True, context=context).data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        obj = self.get_object()
        live, error = resources.resource_live_children(obj)
        context = {**self.get_serializer_context(), "children": resources.resource_children_map([obj]),
                   "live_children": live, "live_children_error": error}
        return Response(ResourceDetailSerializer(obj, context=context).data)

    @extend_schema(summary="The resource's transitions (newest first)",
                   responses={200: TransitionSerializer(many=True), **ERRORS})
    @action(detail=True, methods=["get"], pagination_class=NewestFirstPagination)
    def transitions(self, request: Request, pk: str | None = None) -> Response:
        page = self.paginate_queryset(resources.resource_transitions(self.get_object()))
        return self.get_paginated_response(TransitionSerializer(page, many=True).data)

    @extend_schema(summary="The resource's reconcile runs (newest first)",
                   responses={200: ReconcileRunSerializer(many=True), **ERRORS})
    @action(detail=True, methods=["get"], pagination_class=NewestFirstPagination)
    def reconciles(self, request: Request, pk: str | None = None) -> Response:
        page = self.paginate_queryset(resources.resource_runs(self.get_object()))
        return self.get_paginated_response(ReconcileRunSerializer(page, many=True).data)

    @extend_schema(summary="Kubernetes Events about the resource and its descendants, from the archive",
                   description="One entry per Event (its latest count), most recently seen first; Events stay after "
                               "Kubernetes expires them, until retention (OPSCONSOLE_EVENT_RETENTION_DAYS).",
                   parameters=[EventQuerySerializer], responses={200: EventListSerializer, **ERRORS})
    @action(detail=True, methods=["get"], pagination_class=None)
    def events(self, request: Request, pk: str | None = None) -> Response:
        obj = self.get_object()
        query = EventQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        items = resources.resource_events(obj, limit=q["limit"], event_type=q.get("type", ""), since=q.get("since"))
        return Response(EventListSerializer({"items": items}).data)


@extend_schema_view(list=extend_schema(
    summary="The transition feed",
    description="Newest first; with `since`, the transitions after that id, oldest first (resume a feed).",
    parameters=[TransitionQuerySerializer], responses={200: TransitionSerializer(many=True), **ERRORS}))
class TransitionViewSet(NamespacedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The global audit feed of transitions."""

    serializer_class = TransitionSerializer
    queryset = Resource.objects.none()

    def get_queryset(self) -> Any:
        self._filters = _query(TransitionQuerySerializer, self.request)
        return transitions.transition_list(transitions.TransitionFilters(**self._filters), namespaces=self.namespaces)

    @property
    def paginator(self) -> Any:
        if not hasattr(self, "_paginator"):
            since = "since" in self.request.query_params
            self._paginator = IdCursorPagination() if since else NewestFirstPagination()
        return self._paginator


class _ExportView(NamespacedMixin, APIView):
    """Stream the filtered feed, oldest first, at most `limit` rows (OPSCONSOLE_API_EXPORT_MAX_ROWS)."""

    content_type = "text/plain"
    extension = "txt"

    def rows(self, request: Request) -> Iterator[dict[str, Any]]:
        q = _query(ExportQuerySerializer, request)
        cap = int(getattr(settings, "OPSCONSOLE_API_EXPORT_MAX_ROWS", 100_000))
        limit = min(q.pop("limit", cap), cap)
        qs = transitions.transition_list(transitions.TransitionFilters(**q), namespaces=self.namespaces)
        return transitions.transition_export_rows(qs, limit=limit)

    def render_rows(self, rows: Iterator[dict[str, Any]]) -> Iterator[str]:
        raise NotImplementedError

    def get(self, request: Request) -> StreamingHttpResponse:
        rows = self.rows(request)  # validates now: a bad filter is a 400, not a broken stream
        response = StreamingHttpResponse(self.render_rows(rows), content_type=self.content_type)
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="transitions-{stamp}.{self.extension}"'
        return response


@extend_schema(summary="Export the transition feed as CSV", parameters=[ExportQuerySerializer],
               responses={(200, "text/csv"): OpenApiTypes.STR, **ERRORS})
class TransitionCsvExportView(_ExportView):
    """CSV with a header row; one line per transition, oldest first."""

    content_type = "text/csv; charset=utf-8"
    extension = "csv"

    def render_rows(self, rows: Iterator[dict[str, Any]]) -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=transitions.EXPORT_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            row["created_at"] = row["created_at"].isoformat()
            writer.writerow(row)
            if buffer.tell() > 65536:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue()


@extend_schema(summary="Export the transition feed as JSON lines", parameters=[ExportQuerySerializer],
               responses={(200, "application/x-ndjson"): OpenApiTypes.STR, **ERRORS})
class TransitionJsonlExportView(_ExportView):
    """One JSON object per line per transition, oldest first."""

    content_type = "application/x-ndjson"
    extension = "jsonl"

    def render_rows(self, rows: Iterator[dict[str, Any]]) -> Iterator[str]:
        chunk: list[str] = []
        for row in rows:
            chunk.append(json.dumps(row, cls=DjangoJSONEncoder) + "\n")
            if len(chunk) >= 500:
                yield "".join(chunk)
                chunk = []
        yield "".join(chunk)


@extend_schema_view(
    list=extend_schema(summary="Manual reconcile requests (newest first)", parameters=[ClusterQuerySerializer],
                       responses={200: ReconcileRequestSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(summary="A manual reconcile request's lifecycle",
                           responses={200: ReconcileRequestSerializer, **ERRORS}),
)
class ReconcileRequestViewSet(NamespacedMixin, viewsets.ReadOnlyModelViewSet):
    """Manual reconcile requests: requested → picked up → succeeded / failed, with the run and transition."""

    serializer_class = ReconcileRequestSerializer
    pagination_class = None

    def get_queryset(self) -> Any:
        qs = ReconcileRequest.objects.select_related("run", "transition").order_by("-requested_at", "-id")
        if self.action == "list":
            q = _query(ClusterQuerySerializer, self.request)
            qs = qs.filter(cluster_filter_q(q.get("cluster", ""), q.get("cluster_label", "")))
        return qs.filter(namespace_q(self.namespaces, column="resource__namespace"))

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = list(self.get_queryset()[:200])
        return Response(ReconcileRequestSerializer(page, many=True).data)

    def get_object(self) -> ReconcileRequest:
        try:
            return self.get_queryset().get(pk=self.kwargs["pk"])
        except (ReconcileRequest.DoesNotExist, ValueError, DjangoValidationError) as exc:  # also a malformed UUID
            raise _not_found(exc) from exc


class QueueView(NamespacedMixin, APIView):
    """The workqueue: pending, processing and backing-off keys."""

    @extend_schema(summary="The workqueue now", responses={200: QueueSerializer, 503: ErrorSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        return Response(QueueSerializer(queue.queue_snapshot(namespaces=self.namespaces)).data)


class MetricsSummaryView(NamespacedMixin, APIView):
    """Rates, errors, latencies and phase counts from the metrics source (for a caller limited to namespaces:
    from the database, over its namespaces only)."""

    @extend_schema(summary="Metrics summary over a time range", parameters=[MetricsQuerySerializer],
                   responses={200: MetricsSummarySerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        q = _query(MetricsQuerySerializer, request)
        kind = resources.kind_names(q["kind"])[0] if q.get("kind") else None
        summary = metrics_summary(metrics_source_for(self.namespaces), q["start"], q["end"], kind)
        return Response(MetricsSummarySerializer(summary).data)
