"""`Span`: the local copy of trace spans, for the console's trace view (filled by the observability work)."""

from __future__ import annotations

from django.db import models


class Span(models.Model):
    """One finished OpenTelemetry span."""

    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=255)
    service = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=16, blank=True)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField()
    duration_ms = models.FloatField()
    status_code = models.CharField(max_length=16, blank=True)
    status_message = models.TextField(blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    events = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace_id", "span_id"], name="span_trace_span_unique")]
        indexes = [
            models.Index(fields=["trace_id"], name="span_trace"),
            models.Index(fields=["start_time"], name="span_start_time"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.trace_id}/{self.span_id})"
