"""`GET /api/v1/resources/{id}/revisions`: a resource's spec revisions, newest first, each with who changed it
(the managedFields manager and operation of the changed fields) and its diff from the previous revision;
`?from=G1&to=G2` adds the diff between those two generations."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.api.pagination import NewestFirstPagination
from opsconsole.api.reads import ERRORS, NamespacedMixin
from opsconsole.api.serializers.common import ActorEstablishedField
from reconcilers.models import Resource, SpecRevision
from reconcilers.services.revisions import resource_revisions, revision_compare
from reconcilers.services.selectors import resources


class SpecChangeSerializer(serializers.Serializer):
    """One changed field: a JSON pointer under spec, add / remove / replace, the old and new values."""

    path = serializers.CharField()
    op = serializers.CharField()
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)


class SpecRevisionSerializer(serializers.ModelSerializer):
    """A spec revision: generation, spec, diff from the previous one, who changed it and when."""

    diff = SpecChangeSerializer(many=True, read_only=True)
    managers = serializers.JSONField(read_only=True)
    spec = serializers.JSONField(read_only=True)
    actor_established = ActorEstablishedField()

    class Meta:
        model = SpecRevision
        fields = ["id", "seq", "cluster", "generation", "resource_version", "actor", "actor_established", "operation",
                  "managers", "changed_at", "created_at", "spec", "diff", "hash"]


class ResourceRevisionsView(NamespacedMixin, APIView):
    """The spec revisions of one resource."""

    pagination_class = NewestFirstPagination

    def _resource(self, pk: str) -> Resource:
        try:
            return resources.resource_get(int(pk), namespaces=self.namespaces)
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise NotFound("No such object, or it is outside your namespaces.") from exc

    @extend_schema(
        summary="The resource's spec revisions (newest first), with actor and diff",
        parameters=[OpenApiParameter("from", int, description="a generation to compare (with `to`)"),
                    OpenApiParameter("to", int, description="another generation")],
        responses={200: SpecRevisionSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, pk: str) -> Response:
        resource = self._resource(pk)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(resource_revisions(resource), request, view=self)
        response = paginator.get_paginated_response(SpecRevisionSerializer(page, many=True).data)
        wanted = (request.query_params.get("from"), request.query_params.get("to"))
        if any(wanted):
            compared = revision_compare(resource, *wanted)
            if compared is None:
                raise ValidationError({"from": ["give two generations that have revisions"]})
            data: dict[str, Any] = response.data
            data["compare"] = {"from": compared.older.generation, "to": compared.newer.generation,
                               "diff": SpecChangeSerializer(compared.changes, many=True).data}
        return response
