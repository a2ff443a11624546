"""Serializers: output shapes of the reads, input shapes (query filters and action bodies) that name each
bad field in a 400. No logic: values come from selectors and services."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from opsconsole.accounts.models import ApiToken
from reconcilers.core import actors
from reconcilers.models import ActionRecord, ReconcileRequest, ReconcileRun, Resource, Transition

NAME_MAX = 253


# -- query filters ---------------------------------------------------------------------------------------


CLUSTER_HELP = "only rows of this cluster (its registered name)"
CLUSTER_LABEL_HELP = "only rows of the clusters whose labels match this label selector (`env=prod`)"


class ClusterQuerySerializer(serializers.Serializer):
    """The cluster filters every list takes."""

    cluster = serializers.CharField(required=False, max_length=63, help_text=CLUSTER_HELP)
    cluster_label = serializers.CharField(required=False, max_length=1024, help_text=CLUSTER_LABEL_HELP)


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


class TransitionQuerySerializer(ClusterQuerySerializer):
    """Filters of the transition feed and its exports."""

    kind = serializers.CharField(required=False, max_length=253)
    namespace = serializers.CharField(required=False, max_length=63, allow_blank=True)
    name = serializers.CharField(required=False, max_length=NAME_MAX)
    actor = serializers.CharField(required=False, max_length=255,
                                  help_text="'controller', 'user:<name>', 'rollback:<who>', 'kube:<user>' or 'unknown'")
    from_phase = serializers.CharField(required=False, max_length=63)
    to_phase = serializers.CharField(required=False, max_length=63)
    after = serializers.DateTimeField(required=False, help_text="created at or after (ISO 8601)")
    before = serializers.DateTimeField(required=False, help_text="created before (ISO 8601)")
    since = serializers.IntegerField(
        required=False, min_value=0, max_value=2**63 - 1,
        help_text="resume: only transitions with an id greater than this, oldest first")


class ExportQuerySerializer(TransitionQuerySerializer):
    """Filters of an export, and its size limit."""

    limit = serializers.IntegerField(required=False, min_value=1, max_value=1_000_000)


class MetricsQuerySerializer(serializers.Serializer):
    """The time range of the metrics summary: the last `window` seconds, or [start, end)."""

    window = serializers.IntegerField(required=False, min_value=1, max_value=90 * 86400, default=3600)
    start = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    kind = serializers.CharField(required=False, max_length=253)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end = attrs.get("end") or timezone.now()
        start = attrs.get("start") or end - timezone.timedelta(seconds=attrs["window"])
        if start >= end:
            raise serializers.ValidationError({"start": ["must be earlier than end"]})
        return {**attrs, "start": start, "end": end}


class TokenQuerySerializer(serializers.Serializer):
    """Admins may list everyone's tokens (`all`) or one user's (`username`)."""

    all = serializers.BooleanField(required=False, default=False)
    username = serializers.CharField(required=False, max_length=150)


class ActionQuerySerializer(serializers.Serializer):
    """Filters of the action record."""

    actor = serializers.CharField(required=False, max_length=150)
    action = serializers.CharField(required=False, max_length=64)
    outcome = serializers.ChoiceField(required=False, choices=["allowed", "refused", "rejected", "failed"])
    target = serializers.CharField(required=False, max_length=512,
                                   help_text="a prefix of the target; an object is named by its key, "
                                             "`cache.example.com/v1alpha1/memcacheds/team-a/cache` (every action "
                                             "about it: reconciles, suspensions, admission decisions, created or "
                                             "not), `cache.example.com/v1alpha1/memcacheds/team-a/` (every one in "
                                             "team-a); the `Memcached team-a/cache` form of older admission "
                                             "decisions finds the same records")


# -- action inputs --------------------------------------------------------------------------------------------


class ReconcileInputSerializer(serializers.Serializer):
    """POST resources/<id>/reconcile."""

    reason = serializers.CharField(max_length=2000, help_text="why: recorded with the request and in the audit")


class BulkReconcileInputSerializer(serializers.Serializer):
    """POST resources/reconcile: every visible resource of `kind` matching a selector and/or a phase."""

    kind = serializers.CharField(max_length=253)
    selector = serializers.CharField(required=False, allow_blank=True, max_length=1024, default="")
    phase = serializers.CharField(required=False, allow_blank=True, max_length=63, default="")
    namespace = serializers.CharField(required=False, allow_blank=True, max_length=63, default="")
    cluster = serializers.CharField(required=False, allow_blank=True, max_length=63, default="",
                                    help_text="only this cluster's resources ('' = every cluster you may see)")
    reason = serializers.CharField(max_length=2000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("selector") and not attrs.get("phase"):
            raise serializers.ValidationError({"selector": ["give a label selector or a phase (or both)"]})
        return attrs


class QueueKeyInputSerializer(serializers.Serializer):
    """POST queue/retry-now and queue/reset-backoff."""

    key = serializers.CharField(max_length=1024, help_text="group/version/plural/namespace/name")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class TokenCreateInputSerializer(serializers.Serializer):
    """POST tokens."""

    name = serializers.CharField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True, max_length=1000, default="")
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=3650, allow_null=True,
                                               help_text="none or null: the token does not expire")
    role = serializers.ChoiceField(required=False, allow_blank=True, default="",
                                   choices=["viewer", "operator", "admin"],
                                   help_text="limit the token to this role (at most the user's own)")
    username = serializers.CharField(required=False, max_length=150, help_text="admins: create it for this user")


# -- outputs ---------------------------------------------------------------------------------------------------


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


@extend_schema_field({"type": "string", "enum": list(actors.ESTABLISHED)})
class ActorEstablishedField(serializers.Field):
    """How the row's `actor` was established (`reconcilers.core.actors.established`): `engine` (the engine's own
    write), `session` (an opsconsole user or token), `admission` (the user the Kubernetes API server authenticated),
    `claim` (a field-manager name: anyone may send any, not verified) or `unknown`. Shown next to every actor."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "how `actor` was established: engine, session, admission, claim (a "
                                       "field-manager name, not verified) or unknown")
        super().__init__(source="actor", read_only=True, **kwargs)

    def to_representation(self, value: Any) -> str:
        return actors.established(str(value or ""))


class TransitionSerializer(serializers.ModelSerializer):
    """One audited transition."""

    resource_id = serializers.IntegerField(read_only=True)
    run_id = serializers.IntegerField(read_only=True, allow_null=True)
    actor_established = ActorEstablishedField()

    class Meta:
        model = Transition
        fields = [
            "id", "created_at", "resource_id", "resource_uid", "cluster", "kind", "namespace", "name", "seq",
            "from_phase",
            "to_phase", "reason", "message", "generation", "resource_version", "actor", "actor_established", "run_id",
            "trace_id", "prev_hash", "hash",
        ]


class ReconcileRunSerializer(serializers.ModelSerializer):
    """One reconcile run."""

    resource_id = serializers.IntegerField(read_only=True, allow_null=True)
    request_id = serializers.UUIDField(read_only=True, allow_null=True)

    class Meta:
        model = ReconcileRun
        fields = [
            "id", "key", "cluster", "kind", "resource_id", "started_at", "duration_seconds", "result", "error_class",
            "error_message", "attempt", "worker", "operator_version", "trace_id", "request_id", "triggers",
            "triggers_dropped",
        ]


class ReconcileRequestSerializer(serializers.ModelSerializer):
    """A manual reconcile request and what came of it."""

    resource_id = serializers.IntegerField(read_only=True, allow_null=True)
    run = ReconcileRunSerializer(read_only=True, allow_null=True)
    transition = TransitionSerializer(read_only=True, allow_null=True)
    actor_established = ActorEstablishedField()

    class Meta:
        model = ReconcileRequest
        fields = [
            "id", "resource_id", "key", "cluster", "token", "actor", "actor_established", "reason",
            "idempotency_key", "state", "requested_at",
            "picked_up_at", "finished_at", "run", "transition", "trace_id", "error",
        ]


class BulkFailureSerializer(serializers.Serializer):
    """A resource a bulk request could not ask for."""

    resource_id = serializers.IntegerField()
    key = serializers.CharField()
    code = serializers.CharField()
    error = serializers.CharField()


class BulkOutcomeSerializer(serializers.Serializer):
    """What a bulk reconcile did."""

    matched = serializers.IntegerField()
    requested = ReconcileRequestSerializer(many=True)
    failed = BulkFailureSerializer(many=True)


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


class PendingSerializer(serializers.Serializer):
    """A key waiting for a worker."""

    key = serializers.CharField()
    queued_at = serializers.DateTimeField()
    waiting_seconds = serializers.FloatField()


class ProcessingSerializer(serializers.Serializer):
    """A key being reconciled."""

    key = serializers.CharField()
    owner = serializers.CharField()
    since = serializers.DateTimeField()
    lease_expires = serializers.DateTimeField()
    dirty = serializers.BooleanField()


class BackingOffSerializer(serializers.Serializer):
    """A delayed or backing-off key."""

    key = serializers.CharField()
    failures = serializers.IntegerField()
    next_retry = serializers.DateTimeField()
    retry_in_seconds = serializers.FloatField()


class QueueSerializer(serializers.Serializer):
    """The workqueue now."""

    name = serializers.CharField()
    now = serializers.DateTimeField()
    depth = serializers.IntegerField()
    processing_count = serializers.IntegerField()
    delayed_count = serializers.IntegerField()
    pending = PendingSerializer(many=True)
    processing = ProcessingSerializer(many=True)
    backing_off = BackingOffSerializer(many=True)


class QueueControlSerializer(serializers.Serializer):
    """What a queue control did."""

    key = serializers.CharField()
    changed = serializers.BooleanField()
    failures_before = serializers.IntegerField()


class LatencySerializer(serializers.Serializer):
    """Reconcile time quantiles, seconds."""

    p50 = serializers.FloatField(allow_null=True)
    p95 = serializers.FloatField(allow_null=True)
    p99 = serializers.FloatField(allow_null=True)


class MetricsSummarySerializer(serializers.Serializer):
    """Rates, errors, latencies, queue depth, transitions and phase counts over a time range."""

    source = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    kind = serializers.CharField(allow_blank=True)
    reconcile_rate = serializers.FloatField(help_text="reconciles per second")
    error_rate = serializers.FloatField(help_text="failed reconciles per second")
    error_ratio = serializers.FloatField()
    reconcile_time_seconds = LatencySerializer()
    queue_depth = serializers.IntegerField(allow_null=True)
    transitions_per_kind = serializers.DictField(child=serializers.IntegerField())
    phase_counts = serializers.DictField(child=serializers.DictField(child=serializers.IntegerField()))


class TokenSerializer(serializers.ModelSerializer):
    """A token as listed (never its secret)."""

    username = serializers.CharField(source="user.username", read_only=True)
    active = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "username", "name", "description", "role", "prefix", "created_at", "expires_at",
                  "last_used_at", "revoked_at", "active"]

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_active(self, obj: ApiToken) -> bool:
        return obj.revoked_at is None and (obj.expires_at is None or obj.expires_at > timezone.now())


class IssuedTokenSerializer(TokenSerializer):
    """A token just created: `token` is shown this once."""

    token = serializers.CharField(read_only=True)

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class MeSerializer(serializers.Serializer):
    """Who the caller is: role and namespace limit."""

    username = serializers.CharField()
    role = serializers.CharField(allow_null=True)
    namespaces = serializers.ListField(
        child=serializers.CharField(allow_blank=True), allow_null=True,
        help_text="the grants: `namespace` (of every cluster) or `cluster/namespace`; '' the cluster scope; "
                  "null: not limited")
    auth = serializers.CharField()


class ActionRecordSerializer(serializers.ModelSerializer):
    """One audited action."""

    class Meta:
        model = ActionRecord
        fields = ["id", "created_at", "cluster", "actor", "auth", "token_prefix", "action", "method", "path", "target",
                  "reason", "outcome", "status_code", "detail", "remote_addr"]


class ErrorSerializer(serializers.Serializer):
    """Every error answer."""

    status = serializers.IntegerField()
    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(required=False, child=serializers.JSONField())
    retry_after = serializers.IntegerField(required=False)


class ReadinessCheckSerializer(serializers.Serializer):
    """One readiness check."""

    ok = serializers.BooleanField()
    required = serializers.BooleanField(help_text="whether a failure makes the process unready (503)")
    detail = serializers.CharField(allow_blank=True)
    ms = serializers.FloatField()


class ReadinessSerializer(serializers.Serializer):
    """The readiness probe's answer."""

    ready = serializers.BooleanField()
    degraded = serializers.BooleanField(help_text="a check that is not required failed (e.g. no controller leads)")
    checks = serializers.DictField(child=ReadinessCheckSerializer())
