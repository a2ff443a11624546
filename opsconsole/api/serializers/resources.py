"""The serializers of kinds and resources: the resource list's filters, a registered kind with its state machine, a
resource in a list and in detail (its mirrored and live children), and a resource's archived Events."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from opsconsole.api.serializers.common import NAME_MAX, ClusterQuerySerializer
from reconcilers.models import Resource


class ResourceQuerySerializer(ClusterQuerySerializer):
    """Filters of the resource list."""

    kind = serializers.CharField(required=False, max_length=253, help_text="Kind, plural or plural.group")
    namespace = serializers.CharField(required=False, max_length=63, allow_blank=True)
    phase = serializers.CharField(required=False, max_length=63)
    selector = serializers.CharField(required=False, max_length=1024, help_text="a Kubernetes label selector")
    search = serializers.CharField(required=False, max_length=NAME_MAX, help_text="part of the name")
    stuck_for = serializers.FloatField(
        required=False, min_value=0, max_value=10 * 365 * 86400,
        help_text="only resources in a non-terminal phase for longer than this many seconds")
    generation_lag = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="observedGeneration < generation")
    include_deleted = serializers.BooleanField(required=False, default=False)
    healing = serializers.ChoiceField(required=False, choices=["anomalous", "suspended", "rolling_back", "escalated"],
                                      help_text="only resources in this healing state")
    anomaly = serializers.CharField(required=False, max_length=63, help_text="only resources this anomaly rule "
                                                                             "matches now (e.g. backoff)")


class StateMachineSerializer(serializers.Serializer):
    """A kind's state machine."""

    name = serializers.CharField()
    states = serializers.ListField(child=serializers.CharField())
    initial = serializers.CharField()
    terminal = serializers.ListField(child=serializers.CharField())
    transitions = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    classes = serializers.DictField(
        child=serializers.CharField(), required=False,
        help_text="each state's semantic class: ready, progressing, warning, failed or terminal")


class OwnedKindSerializer(serializers.Serializer):
    """A child kind a reconciler owns."""

    api_version = serializers.CharField()
    kind = serializers.CharField()
    plural = serializers.CharField()


class KindSerializer(serializers.Serializer):
    """One registered reconciler: its kind, resource and state machine."""

    kind = serializers.CharField()
    group = serializers.CharField(allow_blank=True)
    version = serializers.CharField()
    plural = serializers.CharField()
    api_version = serializers.CharField()
    namespaced = serializers.BooleanField()
    controller = serializers.CharField()
    reconciler = serializers.CharField()
    finalizer = serializers.CharField(allow_blank=True)
    owns = OwnedKindSerializer(many=True)
    state_machine = StateMachineSerializer()


class ChildSerializer(serializers.Serializer):
    """A mirrored child resource."""

    id = serializers.IntegerField()
    kind = serializers.CharField()
    namespace = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    phase = serializers.CharField(allow_blank=True)


class LiveChildSerializer(serializers.Serializer):
    """A child object read live from the cluster."""

    apiVersion = serializers.CharField()  # noqa: N815 - the Kubernetes field name
    kind = serializers.CharField()
    namespace = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    uid = serializers.CharField(allow_blank=True)


CHILDREN_HELP = (
    "the resources of registered kinds that this one owns (a controller ownerReference to it), as mirrored in "
    "opsconsole's database, each with its phase: a Tenant's Memcacheds, say. Empty when what it owns are plain "
    "Kubernetes objects (Deployments, Services, ConfigMaps…), which are not mirrored: `live_children` (the "
    "detail only) lists those")


LIVE_CHILDREN_HELP = (
    "every object this one owns in the cluster (its kind's owned kinds, by ownerReference uid), read live from "
    "the Kubernetes API for this response; a child of a registered kind is in both this and `children`. When the "
    "read failed: what was read, and `live_children_error` says why")


class ResourceSerializer(serializers.ModelSerializer):
    """A resource in a list: where it stands, since when, and how its last reconcile went."""

    time_in_phase_seconds = serializers.SerializerMethodField()
    generation_lag = serializers.SerializerMethodField()
    children = serializers.SerializerMethodField(help_text=CHILDREN_HELP)
    active_anomalies = serializers.SerializerMethodField(help_text="the anomaly rules matching now")
    rollback_state = serializers.SerializerMethodField(
        help_text="the last rollback: in_progress, succeeded, failed, refused (null: none)")

    class Meta:
        model = Resource
        fields = [
            "id", "uid", "key", "cluster", "kind", "group", "version", "plural", "namespace", "name", "phase",
            "phase_since",
            "time_in_phase_seconds", "reason", "message", "conditions", "generation", "observed_generation",
            "generation_lag", "labels", "last_reconcile_at", "last_result", "owner", "children", "deleted",
            "deleted_at", "created_at", "updated_at", "suspended", "active_anomalies", "rollback_state",
            "pinned_generation",
        ]

    @extend_schema_field(OpenApiTypes.DOUBLE)
    def get_time_in_phase_seconds(self, obj: Resource) -> float | None:
        if obj.phase_since is None:
            return None
        return max(0.0, (self.context.get("now", timezone.now()) - obj.phase_since).total_seconds())

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_generation_lag(self, obj: Resource) -> bool:
        return obj.observed_generation is None or obj.observed_generation < obj.generation

    @extend_schema_field(ChildSerializer(many=True))
    def get_children(self, obj: Resource) -> list[dict[str, Any]]:
        return (self.context.get("children") or {}).get(obj.uid, [])

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_active_anomalies(self, obj: Resource) -> list[str]:
        return sorted(obj.active_anomalies or {})

    @extend_schema_field(serializers.ChoiceField(choices=["in_progress", "succeeded", "failed", "refused"],
                                                 allow_null=True))
    def get_rollback_state(self, obj: Resource) -> str | None:
        return (obj.rollback or {}).get("state") or None


class ResourceDetailSerializer(ResourceSerializer):
    """One resource: the list fields plus spec, status and the children read live from the cluster."""

    live_children = serializers.SerializerMethodField(help_text=LIVE_CHILDREN_HELP)
    live_children_error = serializers.SerializerMethodField(
        help_text="why `live_children` may be incomplete (the Kubernetes API did not answer); empty when it was read")

    class Meta(ResourceSerializer.Meta):
        fields = [*ResourceSerializer.Meta.fields, "resource_version", "spec", "status", "live_children",
                  "live_children_error", "last_transition_seq"]

    @extend_schema_field(LiveChildSerializer(many=True))
    def get_live_children(self, obj: Resource) -> list[dict[str, Any]]:
        return self.context.get("live_children", [])

    @extend_schema_field(OpenApiTypes.STR)
    def get_live_children_error(self, obj: Resource) -> str:
        return self.context.get("live_children_error", "")


class EventSerializer(serializers.Serializer):
    """A Kubernetes Event about a resource or one of its descendants (Deployment, ReplicaSet, Pod…), from the
    archive: its latest count and when it was last seen."""

    type = serializers.CharField(allow_blank=True, help_text="Normal or Warning")
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    count = serializers.IntegerField()
    first_timestamp = serializers.DateTimeField(allow_null=True)
    last_timestamp = serializers.DateTimeField(allow_null=True)
    source = serializers.CharField(allow_blank=True)
    name = serializers.CharField(allow_blank=True, help_text="the Event object's name")
    involved_kind = serializers.CharField(allow_blank=True, help_text="what it is about: the resource or a descendant")
    involved_namespace = serializers.CharField(allow_blank=True)
    involved_name = serializers.CharField(allow_blank=True)


class EventListSerializer(serializers.Serializer):
    """The resource's Events, from the archive (newest first, at most `limit`)."""

    items = EventSerializer(many=True)


class EventQuerySerializer(serializers.Serializer):
    """Filters of a resource's Events."""

    type = serializers.ChoiceField(choices=["Normal", "Warning"], required=False)
    since = serializers.DateTimeField(required=False, help_text="last seen at or after (ISO 8601)")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=200)
