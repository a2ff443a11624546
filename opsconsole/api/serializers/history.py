"""The serializers of what was recorded: the transition feed's filters and its exports', an audited transition, and
a reconcile run."""

from __future__ import annotations

from rest_framework import serializers

from opsconsole.api.serializers.common import NAME_MAX, ActorEstablishedField, ClusterQuerySerializer
from reconcilers.models import ReconcileRun, Transition


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
