"""`GET …/explain`: why an object is in its state, from the record (`reconcilers.services.explain`), under each
addressing form (by id, by key, by uid), with the object detail's authorisation: an object outside the caller's
namespaces is a 404. `GET /runs/{id}`: one run with its triggers, under the same limit (its resource's
namespace). `GET /slo`: the kinds' phase objectives with their attainment and burn rate (`reconcilers.services.slo`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.accounts.roles import user_namespaces
from opsconsole.api import by_key
from opsconsole.api.reads import ERRORS
from opsconsole.api.serializers.history import ReconcileRunSerializer
from reconcilers.models import ReconcileRun, Resource
from reconcilers.services import explain, slo
from reconcilers.services.selectors.resources import resource_get


class ActorFields(serializers.Serializer):
    actor = serializers.CharField()
    established = serializers.CharField(help_text="engine, session, admission, claim or unknown")
    established_text = serializers.CharField()


class TriggerSerializer(ActorFields):
    """One trigger of a run (reconcilers.engine.triggers)."""

    type = serializers.CharField(help_text="event, manual, resync, requeue or rollback")
    label = serializers.CharField(help_text="the trigger label of opsconsole_reconcile_triggers_total")
    text = serializers.CharField(help_text="the trigger in words")
    at = serializers.FloatField(allow_null=True, help_text="when it was seen (Unix time)")
    object = serializers.DictField(child=serializers.CharField(), required=False,
                                   help_text="the object whose event it was: kind, namespace, name")
    fields = serializers.ListField(child=serializers.CharField(), required=False, help_text="what changed")
    event = serializers.CharField(required=False)
    role = serializers.CharField(required=False, help_text="self: the object itself; child: an object it owns")
    request = serializers.CharField(required=False, help_text="a manual request's id")
    reason = serializers.CharField(required=False, help_text="a requeue's reason")
    error_class = serializers.CharField(required=False)
    run = serializers.IntegerField(required=False, help_text="the run that requeued the key")
    loop = serializers.IntegerField(required=False, help_text="marked a loop: enqueued this many times this minute")


class ExplainTransitionSerializer(ActorFields):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    from_phase = serializers.CharField(allow_blank=True)
    to_phase = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField()
    generation = serializers.IntegerField()
    trace_id = serializers.CharField(allow_blank=True)


class ExplainRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    result = serializers.CharField()
    attempt = serializers.IntegerField()
    duration_seconds = serializers.FloatField()
    error_class = serializers.CharField(allow_blank=True)
    trace_id = serializers.CharField(allow_blank=True)
    operator_version = serializers.CharField(allow_blank=True)
    request_id = serializers.CharField(allow_null=True)
    triggers = TriggerSerializer(many=True)
    triggers_dropped = serializers.IntegerField()


class ChildEventSerializer(serializers.Serializer):
    type = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField(allow_null=True)
    object = serializers.DictField(child=serializers.CharField(allow_blank=True))


class ExplainChildrenSerializer(serializers.Serializer):
    summary = serializers.CharField()
    changed = TriggerSerializer(many=True, help_text="the run's triggers that came from its children")
    events = ChildEventSerializer(many=True, help_text="the children's Events archived before the transition")
    warnings = serializers.IntegerField()


class ExplainAnomalySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    category = serializers.CharField()
    detail = serializers.CharField(allow_blank=True)
    at = serializers.DateTimeField()
    trigger = serializers.CharField(allow_blank=True, help_text="a loop's trigger")


class ExplainSerializer(serializers.Serializer):
    """Why the object is in its phase, from the record."""

    resource = serializers.DictField()
    phase = serializers.CharField(allow_blank=True)
    since = serializers.DateTimeField(allow_null=True)
    transition = ExplainTransitionSerializer(allow_null=True)
    run = ExplainRunSerializer(allow_null=True)
    children = ExplainChildrenSerializer()
    anomalies = ExplainAnomalySerializer(many=True)
    summary = serializers.CharField(help_text="the answer in words")


class RunDetailSerializer(ReconcileRunSerializer):
    """One run with its triggers in words."""

    triggers_explained = serializers.SerializerMethodField()

    class Meta(ReconcileRunSerializer.Meta):
        fields = [*ReconcileRunSerializer.Meta.fields, "triggers_explained"]

    def get_triggers_explained(self, run: ReconcileRun) -> list[dict[str, Any]]:
        return TriggerSerializer(explain.run_triggers(run), many=True).data


class ResourceExplainView(APIView):
    """Why one resource is in its phase."""

    def resource(self, request: Request, pk: str | None) -> Resource:
        try:
            return resource_get(int(pk or ""), namespaces=user_namespaces(request.user))
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise NotFound("No such object, or it is outside your namespaces.") from exc

    @extend_schema(summary="Why the resource is in its phase (from the record)", operation_id="resources_explain",
                   tags=["resources"], responses={200: ExplainSerializer, **ERRORS})
    def get(self, request: Request, pk: str | None = None) -> Response:
        return Response(ExplainSerializer(explain.explain(self.resource(request, pk))).data)


class _ExplainByAddress(by_key.AddressedAction, ResourceExplainView):
    pass


def _by_address(form: str) -> type:
    op, how = by_key.FORMS[form]
    params = by_key.path_parameters(form)
    view = type(f"ExplainBy{form.title()}View", (_ExplainByAddress,), {"__doc__": f"Why the resource is so, {how}."})
    return extend_schema_view(get=extend_schema(
        summary=f"Why the resource is in its phase (from the record), {how}", operation_id=f"{op}_explain",
        tags=["resources"], parameters=params, responses={200: ExplainSerializer, **ERRORS}))(view)


#: the view under each addressing form (`by_key.FORMS`)
BY_ADDRESS = {form: _by_address(form) for form in by_key.FORMS}


class RunDetailView(APIView):
    """One reconcile run, with its triggers."""

    @extend_schema(summary="One reconcile run with its triggers", operation_id="runs_retrieve", tags=["runs"],
                   responses={200: RunDetailSerializer, **ERRORS})
    def get(self, request: Request, pk: str) -> Response:
        try:
            run = explain.run_visible(int(pk), namespaces=user_namespaces(request.user))
        except (ValueError, OverflowError, ReconcileRun.DoesNotExist) as exc:
            raise NotFound("No such run, or it is outside your namespaces.") from exc
        return Response(RunDetailSerializer(run).data)


class SloWindowSerializer(serializers.Serializer):
    window = serializers.CharField()
    seconds = serializers.IntegerField()
    total = serializers.IntegerField(help_text="departures from the phase recorded in the window")
    good = serializers.IntegerField(help_text="those within the bound")
    attainment = serializers.FloatField(allow_null=True)
    burn_rate = serializers.FloatField(allow_null=True, help_text="(1 - attainment) / (1 - target)")


class SloSerializer(serializers.Serializer):
    kind = serializers.CharField()
    name = serializers.CharField()
    title = serializers.CharField()
    phase = serializers.CharField()
    within_seconds = serializers.IntegerField()
    target = serializers.FloatField()
    windows = SloWindowSerializer(many=True)


class SloView(APIView):
    """The kinds' phase objectives with their attainment and burn rate over 1 h, 6 h and 30 d."""

    @extend_schema(summary="Phase objectives: attainment and burn rate from the record", operation_id="slo_list",
                   tags=["metrics"], responses={200: SloSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        report = slo.report(namespaces=user_namespaces(request.user))
        return Response(SloSerializer([r.as_dict() for r in report], many=True).data)
