"""The serializers of the workqueue: its keys now (pending, processing, backing off) and the admin queue controls'
input and outcome."""

from __future__ import annotations

from rest_framework import serializers


class QueueKeyInputSerializer(serializers.Serializer):
    """POST queue/retry-now and queue/reset-backoff."""

    key = serializers.CharField(max_length=1024, help_text="group/version/plural/namespace/name")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


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
