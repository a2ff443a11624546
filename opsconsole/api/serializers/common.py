"""The shapes every API resource shares: the longest name, the cluster filters every list takes, how a row's actor
was established, the error answer, and the readiness probe's answer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from reconcilers.core import actors

NAME_MAX = 253


CLUSTER_HELP = "only rows of this cluster (its registered name)"


CLUSTER_LABEL_HELP = "only rows of the clusters whose labels match this label selector (`env=prod`)"


class ClusterQuerySerializer(serializers.Serializer):
    """The cluster filters every list takes."""

    cluster = serializers.CharField(required=False, max_length=63, help_text=CLUSTER_HELP)
    cluster_label = serializers.CharField(required=False, max_length=1024, help_text=CLUSTER_LABEL_HELP)


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
