"""Self-healing in the API: one resource's healing state and records, the actions a person takes (roll back to a
generation, suspend / resume reconciles, pin / unpin a generation) and the overview's counts.

    GET  /api/v1/resources/{id}/healing             the summary (`HealingSummary`) and the records, newest first
    POST /api/v1/resources/{id}/rollback            {"generation": N, "reason": "…"}
    POST /api/v1/resources/{id}/suspend             {"reason": "…", "until": RFC 3339} or {"reason", "for_seconds"}
    POST /api/v1/resources/{id}/resume              {"reason": "…"}
    POST /api/v1/resources/{id}/pin                 {"generation": N, "reason": "…"}
    POST /api/v1/resources/{id}/unpin               {"reason": "…"}
    GET  /api/v1/healing                            counts over the caller's namespaces

The same sub-paths answer by Kubernetes key and by uid (`opsconsole.api.by_key`'s addressing). Actions are built
like the reconcile action (`opsconsole.api.actions`): the operator role, the per-user throttle, the namespace
limit and an ActionRecord for every attempt, allowed, refused or rejected. A refusal of the service
(`HealingRefused`) answers its status with the field at fault named: `{"fields": {"generation": ["…"]}}`.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.api import by_key
from opsconsole.api.actions import ACTION_ERRORS, ResourceReconcileView, _valid, actor_of
from opsconsole.api.exceptions import Unavailable, error_body
from opsconsole.api.reads import ERRORS, NamespacedMixin
from opsconsole.api.serializers.healing import (
    RECORDS_DEFAULT,
    GenerationInputSerializer,
    HealingOverviewSerializer,
    HealingQuerySerializer,
    HealingRecordSerializer,
    HealingSummarySerializer,
    ReasonInputSerializer,
    SuspendInputSerializer,
)
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import escalation, healing
from reconcilers.services.selectors import resources


def summary_data(resource: Resource, *, limit: int = RECORDS_DEFAULT) -> dict[str, Any]:
    """The summary of one resource with its records, as the serializer takes it."""
    summary = healing.resource_healing(resource)
    records = healing.resource_healing_records(resource, limit=limit)
    deliveries = escalation.record_deliveries(records)
    for record in records:
        record.deliveries_shown = deliveries.get(record.pk, [])
    needing = set(escalation.rules_needing_person(resource))
    anomalies = [{**a, "needs_person": a.get("rule") in needing} for a in summary.anomalies]
    return {**summary.__dict__, "anomalies": anomalies, "rolling_back": summary.rolling_back,
            "escalated": summary.escalated, "records": records}


# -- reads --------------------------------------------------------------------------------------------------


class ResourceHealingView(NamespacedMixin, APIView):
    """One resource's healing state and records."""

    def _resource(self, request: Request, pk: str | None) -> Resource:
        try:
            return resources.resource_get(int(pk or ""), namespaces=self.namespaces)
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise NotFound("No such object, or it is outside your namespaces.") from exc

    @extend_schema(summary="The resource's healing state and records (newest first)", tags=["healing"],
                   operation_id="resources_healing", parameters=[HealingQuerySerializer],
                   responses={200: HealingSummarySerializer, **ERRORS})
    def get(self, request: Request, pk: str | None = None) -> Response:
        query = HealingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        resource = self._resource(request, pk)
        return Response(HealingSummarySerializer(summary_data(resource, limit=query.validated_data["limit"])).data)


class HealingOverviewView(NamespacedMixin, APIView):
    """Counts for the overview: anomalies by kind and rule, suspended, rolling back, escalated."""

    @extend_schema(summary="Healing counts over your namespaces", tags=["healing"], operation_id="healing_overview",
                   responses={200: HealingOverviewSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        return Response(HealingOverviewSerializer(healing.healing_overview(self.namespaces)).data)


# -- actions ------------------------------------------------------------------------------------------------


def refusal(exc: healing.HealingRefused) -> Response:
    """The answer to a refused healing action: its status, the field at fault named like a 400's."""
    code = "invalid" if exc.status == 400 else ("conflict" if exc.status == 409 else "refused")
    return Response(error_body(exc.status, code, f"{exc.field}: {exc.message}", fields={exc.field: [exc.message]}),
                    status=exc.status)


class _HealingActionView(ResourceReconcileView):
    """A healing action on one resource: validate, find the resource (404 outside one's namespaces), call the
    service, answer 202 with the healing record (the reconcile action's permission, throttle, lookup and action
    record)."""

    input_serializer: type[serializers.Serializer] = ReasonInputSerializer

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        raise NotImplementedError

    def post(self, request: Request, pk: str | None = None) -> Response:
        data = _valid(self.input_serializer, request)
        resource = self.resource(request, pk)
        self._target = resource.key
        try:
            record = self.act(resource, data, actor_of(request))
        except healing.HealingRefused as exc:
            return refusal(exc)
        except Exception as exc:  # the Kubernetes API or Redis did not answer
            if getattr(exc, "status", None) == 404:
                raise NotFound("The object is no longer in the cluster.") from exc
            raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
        self.audit_detail = {"healing_record": record.seq, "healing_action": record.action}
        return Response(HealingRecordSerializer(record).data, status=status.HTTP_202_ACCEPTED)


def _schema(summary: str, op: str, request: type) -> Any:
    return extend_schema(summary=summary, operation_id=op, request=request, tags=["healing"],
                         responses={202: HealingRecordSerializer, **ACTION_ERRORS})


class ResourceRollbackView(_HealingActionView):
    """Roll back to the spec of an earlier generation (written through the Kubernetes API, then verified)."""

    audit_action = "resource.rollback"
    input_serializer = GenerationInputSerializer

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        return healing.resource_rollback(resource, data["generation"], actor=actor, reason=data["reason"])

    @_schema("Roll back to an earlier generation's spec", "resources_rollback", GenerationInputSerializer)
    def post(self, request: Request, pk: str | None = None) -> Response:
        return super().post(request, pk)


class ResourceSuspendView(_HealingActionView):
    """Suspend reconciles (the record and the `opsconsole.io/suspended` annotation)."""

    audit_action = "resource.suspend"
    input_serializer = SuspendInputSerializer

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        return healing.resource_suspend(resource, actor=actor, reason=data["reason"], until=data.get("until"))

    @_schema("Suspend the resource's reconciles", "resources_suspend", SuspendInputSerializer)
    def post(self, request: Request, pk: str | None = None) -> Response:
        return super().post(request, pk)


class ResourceResumeView(_HealingActionView):
    """Resume reconciles (the annotation removed, the key enqueued)."""

    audit_action = "resource.resume"

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        return healing.resource_resume(resource, actor=actor, reason=data["reason"])

    @_schema("Resume the resource's reconciles", "resources_resume", ReasonInputSerializer)
    def post(self, request: Request, pk: str | None = None) -> Response:
        return super().post(request, pk)


class ResourcePinView(_HealingActionView):
    """Pin a generation: automatic rollback never restores an older one."""

    audit_action = "resource.pin"
    input_serializer = GenerationInputSerializer

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        return healing.resource_pin(resource, data["generation"], actor=actor, reason=data["reason"])

    @_schema("Pin a generation (automatic rollback never goes past it)", "resources_pin", GenerationInputSerializer)
    def post(self, request: Request, pk: str | None = None) -> Response:
        return super().post(request, pk)


class ResourceUnpinView(_HealingActionView):
    """Remove the pin."""

    audit_action = "resource.unpin"

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        return healing.resource_unpin(resource, actor=actor, reason=data["reason"])

    @_schema("Remove the pinned generation", "resources_unpin", ReasonInputSerializer)
    def post(self, request: Request, pk: str | None = None) -> Response:
        return super().post(request, pk)


#: the actions by URL sub-path
ACTIONS: dict[str, type[_HealingActionView]] = {
    "rollback": ResourceRollbackView, "suspend": ResourceSuspendView, "resume": ResourceResumeView,
    "pin": ResourcePinView, "unpin": ResourceUnpinView,
}


# -- the same by Kubernetes key and by uid ----------------------------------------------------------------


#: the id view's action with the lookup by key or uid (outside the caller's namespaces: 404)
_ActionByAddress = by_key.AddressedAction


class _HealingByAddress(by_key._AddressedMixin):
    address: dict[str, str]
    namespaces: frozenset[str] | None

    def _resource(self, request: Request, pk: str | None) -> Resource:
        try:
            return by_key.resolve(self.address, namespaces=self.namespaces)
        except Resource.DoesNotExist as exc:
            raise by_key.not_found(exc) from exc


def _by_address(form: str) -> dict[str, type]:
    """The healing views addressed one way (`by_key.FORMS`): {sub-path: view}."""
    op, how = by_key.FORMS[form]
    params = by_key.path_parameters(form)
    common = {"tags": ["healing"], "description": by_key.DESCRIPTION.format(how=how)}
    out: dict[str, type] = {
        "healing": extend_schema_view(get=extend_schema(
            operation_id=f"{op}_healing", summary=f"The resource's healing state and records, {how}",
            parameters=[*params, HealingQuerySerializer], **common,
        ))(type(f"HealingBy{form.title()}View", (_HealingByAddress, ResourceHealingView), {"__doc__": how}))}
    for sub, view in ACTIONS.items():
        out[sub] = extend_schema_view(post=extend_schema(
            operation_id=f"{op}_{sub}", summary=f"{sub.title()} one resource, {how}", parameters=params, **common,
        ))(type(f"{view.__name__}By{form.title()}", (_ActionByAddress, view), {"__doc__": f"{view.__doc__} ({how})"}))
    return out


BY_ADDRESS = {form: _by_address(form) for form in by_key.FORMS}
