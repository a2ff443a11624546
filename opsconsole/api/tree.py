"""`GET /api/v1/resources/{id}/tree`: the resource's health tree, read live from the Kubernetes API with the
console's identity (one cached LIST per child kind: `reconcilers.services.selectors.health_tree`): the resource,
the objects it owns by controller ownerReference and their descendants (ReplicaSets, Pods), each with its
kstatus-like health (Current / InProgress / Failed), ready count and a Pod's waiting reason. An unreachable
API answers 200 with what could be read and `error` set."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.api.reads import ERRORS, NamespacedMixin
from reconcilers.models import Resource
from reconcilers.services.selectors import health_tree, resources
from reconcilers.services.selectors.object_health import CURRENT, FAILED, IN_PROGRESS


class HealthSerializer(serializers.Serializer):
    """kstatus-like health: Current, InProgress or Failed; a message; "2/3 ready"; a Pod's waiting reason."""

    status = serializers.ChoiceField(choices=[CURRENT, IN_PROGRESS, FAILED])
    message = serializers.CharField()
    ready = serializers.CharField()
    reason = serializers.CharField()


class TreeNodeSerializer(serializers.Serializer):
    """One object of the tree and the objects it controls."""

    apiVersion = serializers.CharField()  # noqa: N815 - the Kubernetes field name
    kind = serializers.CharField()
    plural = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    uid = serializers.CharField()
    health = HealthSerializer()
    children = serializers.ListField(child=serializers.DictField(), help_text="TreeNode objects, recursively")


class HealthTreeSerializer(serializers.Serializer):
    """The tree (its root is the resource) and the API's error, if any."""

    root = TreeNodeSerializer()
    error = serializers.CharField(help_text="empty, or why the children could not (all) be read")


class ResourceTreeView(NamespacedMixin, APIView):
    """The health tree of one resource."""

    @extend_schema(summary="The resource's health tree: owned children and their descendants, with health",
                   responses={200: HealthTreeSerializer, **ERRORS})
    def get(self, request: Request, pk: str) -> Response:
        try:
            resource = resources.resource_get(int(pk), namespaces=self.namespaces)
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise NotFound("No such object, or it is outside your namespaces.") from exc
        tree = health_tree.resource_tree(resource, namespaces=self.namespaces)
        return Response({"root": tree.root.as_dict(), "error": tree.error})
