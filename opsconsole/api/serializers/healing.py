"""The healing API's serializers (`opsconsole.api.healing`): the actions' inputs (a reason; a generation; a
suspension's end), a healing record with its notification deliveries, one resource's healing summary, and the
overview's counts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from opsconsole.api.serializers.common import ActorEstablishedField
from reconcilers.models import HealingRecord
from reconcilers.services import escalation

RECORDS_DEFAULT, RECORDS_MAX = 100, 500
MAX_SUSPEND_SECONDS = 366 * 86400


# -- serializers --------------------------------------------------------------------------------------------


class ReasonInputSerializer(serializers.Serializer):
    """POST resume / unpin: why (recorded with the healing record and in the action record)."""

    reason = serializers.CharField(max_length=1000, help_text="why: recorded with the healing record")


class GenerationInputSerializer(ReasonInputSerializer):
    """POST rollback / pin: the generation and why."""

    generation = serializers.IntegerField(min_value=1, max_value=2**63 - 1,
                                          help_text="rollback: an earlier generation with a spec on record; "
                                                    "pin: the generation automatic rollback never goes past")


class SuspendInputSerializer(ReasonInputSerializer):
    """POST suspend: why, and optionally when it ends (`until`, or `for_seconds` from now); neither: until
    resumed."""

    until = serializers.DateTimeField(required=False, allow_null=True, help_text="RFC 3339; must be in the future")
    for_seconds = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                           max_value=MAX_SUSPEND_SECONDS, help_text="ends this many seconds from now")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("until") is not None and attrs.get("for_seconds") is not None:
            raise serializers.ValidationError({"until": ["give until or for_seconds, not both"]})
        if attrs.get("for_seconds") is not None:
            attrs["until"] = timezone.now() + timedelta(seconds=attrs["for_seconds"])
        return attrs


class DeliverySerializer(serializers.Serializer):
    """One notification of a healing record to a configured receiver (docs/healing.md, Notifications)."""

    receiver = serializers.CharField()
    url = serializers.CharField(help_text="without user info or query string")
    state = serializers.ChoiceField(choices=["pending", "retrying", "delivered", "failed"])
    attempts = serializers.IntegerField()
    last_status = serializers.IntegerField(allow_null=True, help_text="the receiver's last HTTP status")
    last_error = serializers.CharField(allow_blank=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)


class HealingRecordSerializer(serializers.ModelSerializer):
    """One healing record of the resource's chain, with its notifications."""

    detail = serializers.JSONField(read_only=True)
    actor_established = ActorEstablishedField()
    deliveries = serializers.SerializerMethodField()

    class Meta:
        model = HealingRecord
        fields = ["id", "seq", "cluster", "action", "actor", "actor_established", "rule", "reason", "message",
                  "generation",
                  "target_generation", "detail", "expires_at", "created_at", "hash", "deliveries"]

    @extend_schema_field(DeliverySerializer(many=True))
    def get_deliveries(self, obj: HealingRecord) -> list[dict[str, Any]]:
        shown = getattr(obj, "deliveries_shown", None)
        if shown is None:
            shown = escalation.record_deliveries([obj]).get(obj.pk, [])
        return DeliverySerializer(shown, many=True).data


class HealingRuleSerializer(serializers.Serializer):
    """An anomaly rule of the kind."""

    name = serializers.CharField()
    type = serializers.CharField()
    describe = serializers.CharField()
    rollback = serializers.BooleanField()


class HealingSummarySerializer(serializers.Serializer):
    """A resource's healing state, its kind's healing settings, and its healing records (newest first)."""

    anomalies = serializers.ListField(
        child=serializers.DictField(),
        help_text="[{rule, since, message, generation (the one it is about; null when not on record), rollback_ok "
                  "(true, false, null when not on record), why_not, record, recorded_at, recorded_at_generation, "
                  "evidence: {figures, events: [{reason, type, involved, occurrences, first_timestamp, "
                  "last_timestamp, generation, message}], samples: [{at, value, labels}], metric}, needs_person, "
                  "acknowledged: {by, at, note, record}, assignee: {to, by, at, note, record}}]")
    suspended = serializers.BooleanField()
    suspension = serializers.DictField(allow_null=True, help_text="{actor, reason, at, until, source}")
    rollback = serializers.DictField(allow_null=True, help_text="{state, actor, from_generation, to_generation, "
                                                                 "generation, started_at, deadline, reason}")
    rolling_back = serializers.BooleanField()
    escalated = serializers.BooleanField()
    pinned_generation = serializers.IntegerField(allow_null=True)
    auto_rollback = serializers.BooleanField(help_text="whether automatic rollback is on for this object")
    auto_rollback_source = serializers.ChoiceField(
        choices=["annotation", "kind"],
        help_text="annotation: the object's opsconsole.io/auto-rollback; kind: its kind's setting")
    rollback_after_seconds = serializers.FloatField()
    verify_seconds = serializers.FloatField()
    rules = HealingRuleSerializer(many=True)
    last_good_generation = serializers.IntegerField(allow_null=True)
    rollback_phase = serializers.CharField(allow_null=True)
    not_evaluated = serializers.ListField(
        child=serializers.DictField(), help_text="[{rule, since, reason, cause, record}]: rules (metric rules) "
        "that could not be evaluated (Prometheus unreachable, a query error, no series): never read as healthy")
    records = HealingRecordSerializer(many=True)


class HealingCountSerializer(serializers.Serializer):
    """Resources of a kind matching an anomaly rule now."""

    kind = serializers.CharField()
    rule = serializers.CharField()
    count = serializers.IntegerField()


class HealingOverviewSerializer(serializers.Serializer):
    """Counts over the caller's namespaces."""

    anomalous = serializers.IntegerField()
    suspended = serializers.IntegerField()
    rolling_back = serializers.IntegerField()
    escalated = serializers.IntegerField()
    by_rule = HealingCountSerializer(many=True)
    at = serializers.CharField()


class HealingQuerySerializer(serializers.Serializer):
    """How many records."""

    limit = serializers.IntegerField(required=False, min_value=1, max_value=RECORDS_MAX, default=RECORDS_DEFAULT)
