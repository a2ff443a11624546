"""Django admin for the engine's tables, all read-only.

The audit tables (Transition, ReconcileRun, Anomaly) are the record and must not be edited; the mirror,
requests and spans are written by the engine and the services only (a manual reconcile goes through the
service so the annotation, the enqueue and the request row stay together).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from reconcilers.models import Anomaly, ReconcileRequest, ReconcileRun, Resource, Span, Transition


class ReadOnlyAdmin(admin.ModelAdmin):
    """View only: no add, change or delete, whoever asks."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nobody adds rows here."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nobody changes rows here."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Nobody deletes rows here."""
        return False


@admin.register(Resource)
class ResourceAdmin(ReadOnlyAdmin):
    """The mirror of the reconciled objects."""

    list_display = ("kind", "namespace", "name", "phase", "phase_since", "generation", "observed_generation", "deleted")
    list_filter = ("kind", "phase", "deleted")
    search_fields = ("name", "namespace", "uid")


@admin.register(Transition)
class TransitionAdmin(ReadOnlyAdmin):
    """The append-only, hash-chained transition log."""

    list_display = ("created_at", "kind", "namespace", "name", "seq", "from_phase", "to_phase", "reason", "actor")
    list_filter = ("kind", "to_phase", "actor")
    search_fields = ("name", "namespace", "resource_uid", "trace_id")
    raw_id_fields = ("resource", "run")


@admin.register(Anomaly)
class AnomalyAdmin(ReadOnlyAdmin):
    """Refused phase changes."""

    list_display = ("created_at", "resource", "from_phase", "to_phase", "reason", "generation")
    list_filter = ("to_phase",)
    raw_id_fields = ("resource", "run")


@admin.register(ReconcileRun)
class ReconcileRunAdmin(ReadOnlyAdmin):
    """One row per reconcile."""

    list_display = ("started_at", "key", "result", "duration_seconds", "attempt", "worker", "error_class")
    list_filter = ("kind", "result")
    search_fields = ("key", "trace_id", "worker")
    raw_id_fields = ("resource", "request")


@admin.register(ReconcileRequest)
class ReconcileRequestAdmin(ReadOnlyAdmin):
    """Manual reconcile requests and what came of them."""

    list_display = ("requested_at", "key", "actor", "state", "finished_at")
    list_filter = ("state",)
    search_fields = ("key", "actor", "token")
    raw_id_fields = ("resource", "run", "transition")


@admin.register(Span)
class SpanAdmin(ReadOnlyAdmin):
    """Trace spans kept locally."""

    list_display = ("start_time", "name", "service", "duration_ms", "status_code", "trace_id")
    search_fields = ("trace_id", "name")
