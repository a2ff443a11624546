"""The serializers of the metrics summary: its time range and what it answers (rates, errors, latency quantiles,
queue depth, transitions and phase counts)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers


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
