"""The serializers of manual reconciles: the inputs of one resource's and of a bulk reconcile, a request and what
came of it, and a bulk reconcile's outcome."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from opsconsole.api.serializers.common import ActorEstablishedField
from opsconsole.api.serializers.history import ReconcileRunSerializer, TransitionSerializer
from reconcilers.models import ReconcileRequest


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
