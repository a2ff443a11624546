"""Live verbosity in the API (see `reconcilers.services.verbosity`):

    POST /api/v1/resources/{id}/verbosity   {"modules": "reconcile=debug,client=debug", "minutes": 30, "reason": "…"}
                                            (minutes 0: switch it off now)       — operator, the object's namespace
    POST /api/v1/verbosity                  {"scope": "kind:Memcached" | "all", "modules": …, "minutes": …}   — admin
    GET  /api/v1/verbosity                  the settings in force (object ones within the caller's namespaces)
    GET  /api/v1/runs/{id}/log              the log lines a verbose run kept (the run within the caller's namespaces)

Every change, allowed or refused, is an ActionRecord (`verbosity.set`, `verbosity.clear`) with the scope, the
modules and the expiry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.accounts.roles import key_allowed, user_namespaces
from opsconsole.api.actions import ACTION_ERRORS, _valid, actor_of
from opsconsole.api.audit import AuditedActionView
from opsconsole.api.exceptions import Unavailable
from opsconsole.api.permissions import IsAdmin, IsOperator, IsViewer
from opsconsole.api.reads import ERRORS
from opsconsole.api.throttling import ActionThrottle
from reconcilers.models import ReconcileRun, Resource
from reconcilers.services import verbosity
from reconcilers.services.selectors.resources import resource_get


class VerbosityInputSerializer(serializers.Serializer):
    """Modules and levels, and for how long."""

    modules = serializers.CharField(max_length=200, required=False, default="reconcile=debug",
                                    help_text="reconcile=debug,client=debug (modules: reconcile, client, engine; "
                                              "levels: debug, info, warning)")
    minutes = serializers.IntegerField(min_value=0, max_value=verbosity.MAX_MINUTES,
                                       help_text="how long (0: switch it off now)")
    reason = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")


class ScopedVerbosityInputSerializer(VerbosityInputSerializer):
    """A kind's or every run's verbosity."""

    scope = serializers.CharField(max_length=80, help_text="kind:<Kind> or all")


class SettingSerializer(serializers.Serializer):
    """One verbosity in force."""

    scope = serializers.CharField()
    modules = serializers.DictField(child=serializers.CharField())
    until = serializers.DateTimeField()
    actor = serializers.CharField(allow_blank=True)
    set_at = serializers.DateTimeField()
    source = serializers.CharField()


class VerbosityAnswerSerializer(serializers.Serializer):
    """What a change did: the setting now in force (null when switched off) or whether one was cleared."""

    scope = serializers.CharField()
    setting = SettingSerializer(allow_null=True)
    cleared = serializers.BooleanField(help_text="minutes 0: whether a setting was in force and is now off")


class RunLinesSerializer(serializers.Serializer):
    """The log lines a verbose run kept."""

    run_id = serializers.IntegerField()
    level = serializers.CharField()
    lines = serializers.ListField(child=serializers.CharField())
    dropped = serializers.IntegerField(help_text="lines beyond the bound: counted, not kept")


def _shown(setting: verbosity.Setting | None) -> dict[str, Any] | None:
    if setting is None:
        return None
    data = setting.as_dict()
    data["until"] = datetime.fromtimestamp(setting.until, UTC)
    data["set_at"] = datetime.fromtimestamp(setting.set_at or setting.until, UTC)
    return SettingSerializer(data).data


class _VerbosityChange(AuditedActionView):
    throttle_classes = [ActionThrottle]
    audit_action = "verbosity.set"

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "") or ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))

    def change(self, request: Request, scope: str, data: dict[str, Any]) -> Response:
        self._target = scope
        self.audit_detail = {"scope": scope, "modules": data["modules"], "minutes": data["minutes"]}
        try:
            if data["minutes"] == 0:
                self.audit_action = "verbosity.clear"
                return Response({"scope": scope, "setting": None, "cleared": verbosity.verbosity_clear(scope)})
            setting = verbosity.verbosity_set(scope, data["modules"], data["minutes"], actor=actor_of(request))
        except verbosity.VerbosityError as exc:
            raise ValidationError({exc.field: [str(exc)]}) from exc
        except Exception as exc:  # Redis did not answer
            raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
        self.audit_detail["until"] = setting.until
        return Response({"scope": scope, "setting": _shown(setting), "cleared": False})


class ResourceVerbosityView(_VerbosityChange):
    """Set or clear one resource's verbosity."""

    permission_classes = [IsOperator]

    @extend_schema(summary="Set (or, minutes 0, clear) one resource's log verbosity until an expiry",
                   operation_id="resources_verbosity", request=VerbosityInputSerializer, tags=["debugging"],
                   responses={200: VerbosityAnswerSerializer, **ACTION_ERRORS})
    def post(self, request: Request, pk: str | None = None) -> Response:
        data = _valid(VerbosityInputSerializer, request)
        try:
            resource = resource_get(int(pk or ""), namespaces=user_namespaces(request.user))
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            self._target = f"resource:{pk}"
            raise NotFound("No such object, or it is outside your namespaces.") from exc
        return self.change(request, f"object:{resource.key}", data)


class VerbosityView(_VerbosityChange):
    """The verbosity settings in force; a kind's or every run's (admins)."""

    def get_permissions(self) -> list[Any]:
        return [IsViewer()] if self.request.method == "GET" else [IsAdmin()]

    @extend_schema(summary="The verbosity settings in force", operation_id="verbosity_list", tags=["debugging"],
                   responses={200: SettingSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        try:
            settings = verbosity.verbosity_list()
        except Exception as exc:
            raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
        shown = [s for s in settings if not s.scope.startswith("object:")
                 or key_allowed(request.user, s.scope.removeprefix("object:"))]
        return Response([_shown(s) for s in shown])

    @extend_schema(summary="Set (or, minutes 0, clear) a kind's or every run's log verbosity until an expiry",
                   operation_id="verbosity_set", request=ScopedVerbosityInputSerializer, tags=["debugging"],
                   responses={200: VerbosityAnswerSerializer, **ACTION_ERRORS})
    def post(self, request: Request) -> Response:
        data = _valid(ScopedVerbosityInputSerializer, request)
        if data["scope"] != "all" and not data["scope"].startswith("kind:"):
            self._target = data["scope"]
            raise ValidationError({"scope": ["kind:<Kind> or all (an object's: POST resources/{id}/verbosity)"]})
        return self.change(request, data["scope"], data)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if request.method == "GET":  # a read is not an action: not recorded
            return APIView.finalize_response(self, request, response, *args, **kwargs)
        return super().finalize_response(request, response, *args, **kwargs)


class RunLogView(APIView):
    """The log lines a verbose run kept."""

    permission_classes = [IsViewer]

    @extend_schema(summary="The log lines a verbose run kept", operation_id="runs_log", tags=["debugging"],
                   responses={200: RunLinesSerializer, **ERRORS})
    def get(self, request: Request, pk: str) -> Response:
        run = ReconcileRun.objects.filter(pk=int(pk) if pk.isdigit() and len(pk) < 19 else 0).first()
        if run is None or not key_allowed(request.user, run.key):
            raise NotFound("No such run, or it is outside your namespaces.")
        found = verbosity.run_lines(run.pk)
        if found is None:
            raise NotFound(f"Run {run.pk} was not a verbose run: it kept no log lines.")
        return Response(RunLinesSerializer(found).data)
