"""`GET /api/v1/runs/versions`: the operator versions that ran in a window compared on their evidence (runs, error
rate, run duration, objects touched, failed transitions, anomalies, time to ready), so that promoting a canary
version is a decision on figures (`reconcilers.services.selectors.versions` says what each counts). Any role may
read it; a caller limited to namespaces gets the figures of its namespaces only."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.api.reads import ERRORS, NamespacedMixin
from reconcilers.services.selectors import resources
from reconcilers.services.selectors.versions import version_comparison

#: the longest window one may ask for
MAX_WINDOW = timedelta(days=90)
_SECONDS_RE = re.compile(r"^\s*\d+(\.\d+)?\s*$")


class VersionQuerySerializer(serializers.Serializer):
    """The window (`since`: an RFC 3339 time, or how many seconds back; default the last hour) and a kind."""

    since = serializers.CharField(
        required=False, max_length=64,
        help_text="the window's start: an RFC 3339 time with its offset (2026-01-02T03:04:05Z), or a number of "
                  "seconds before now (3600); at most 90 days back; default the last hour")
    kind = serializers.CharField(required=False, max_length=253, help_text="Kind, plural or plural.group")

    def validate_since(self, value: str) -> datetime:
        now = timezone.now()
        if _SECONDS_RE.match(value):
            seconds = float(value)
            if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_WINDOW.total_seconds():
                raise serializers.ValidationError("a number of seconds must be above 0 and at most 90 days")
            return now - timedelta(seconds=seconds)
        try:
            moment = parse_datetime(value.strip())
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise serializers.ValidationError(
                "give an RFC 3339 time with its offset (2026-01-02T03:04:05Z) or a number of seconds")
        if moment >= now:
            raise serializers.ValidationError("must be in the past")
        if now - moment > MAX_WINDOW:
            raise serializers.ValidationError("at most 90 days back")
        return moment

    def validate_kind(self, value: str) -> str:
        kind, group = resources.kind_names(value)
        if group is None:
            raise serializers.ValidationError(f"no registered kind is named {value!r}")
        return kind


class VersionFiguresSerializer(serializers.Serializer):
    """One operator version's figures over the window."""

    version = serializers.CharField(allow_blank=True,
                                    help_text="ReconcileRun.operator_version; '' for runs recorded before it was")
    runs = serializers.IntegerField()
    error_runs = serializers.IntegerField(help_text="runs that ended in error")
    error_rate = serializers.FloatField(allow_null=True, help_text="error runs / runs; null without runs")
    highest_error_rate = serializers.BooleanField(
        help_text="strictly the highest error rate of two or more versions that ran")
    duration_p50_seconds = serializers.FloatField(source="duration_p50", allow_null=True)
    duration_p95_seconds = serializers.FloatField(source="duration_p95", allow_null=True)
    objects = serializers.IntegerField(help_text="distinct objects its runs reconciled")
    failed_transitions = serializers.IntegerField(
        help_text="transitions into a phase of the failed class recorded by its runs")
    anomalies = serializers.IntegerField(
        help_text="anomalies raised in the window on objects whose last run in the window was by this version")
    ready_objects = serializers.IntegerField(
        help_text="objects created in the window that this version's runs brought to a ready phase first")
    time_to_ready_p50_seconds = serializers.FloatField(source="time_to_ready_p50", allow_null=True,
                                                       help_text="from the first transition to the first ready one")
    time_to_ready_p95_seconds = serializers.FloatField(source="time_to_ready_p95", allow_null=True)


class VersionComparisonSerializer(serializers.Serializer):
    """The versions that ran in [since, until), most runs first."""

    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    kind = serializers.CharField(allow_blank=True, help_text="'' for every kind")
    runs_read = serializers.IntegerField()
    capped = serializers.BooleanField(help_text="the window held more runs than `cap`: the newest `cap` were read")
    cap = serializers.IntegerField()
    highest_error_rate = serializers.CharField(allow_null=True,
                                               help_text="the version with the highest error rate, when two or more "
                                                         "ran and one is strictly the highest")
    versions = VersionFiguresSerializer(many=True)


class RunVersionsView(NamespacedMixin, APIView):
    """Operator versions compared over a window."""

    @extend_schema(summary="Operator versions compared on their runs (a canary against the rest)",
                   parameters=[VersionQuerySerializer], responses={200: VersionComparisonSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        query = VersionQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q: dict[str, Any] = query.validated_data
        comparison = version_comparison(since=q.get("since"), kind=q.get("kind", ""), namespaces=self.namespaces)
        return Response(VersionComparisonSerializer(comparison).data)
