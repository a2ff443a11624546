"""Escalation in the API: acknowledge, assign and resolve an anomaly that needs a person.

    POST /api/v1/resources/{id}/anomalies/{rule}/acknowledge   {"note": "…"} (optional)
    POST /api/v1/resources/{id}/anomalies/{rule}/assign        {"assignee": "<username>", "note": "…"}
    POST /api/v1/resources/{id}/anomalies/{rule}/resolve       {"note": "…"} (required)

The same sub-paths answer by Kubernetes key and by uid. Each is a healing action (`opsconsole.api.healing`): the
operator role, the throttle, the namespace limit, an ActionRecord for every attempt (the rule and the note in its
detail), 202 with the healing record; a refusal names the field at fault (`rule`, `note`, `assignee`). The logic is
`reconcilers.services.escalation`'s.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from opsconsole.accounts.assignees import assignee_refusal
from opsconsole.api import by_key
from opsconsole.api.actions import ACTION_ERRORS
from opsconsole.api.healing import _ActionByAddress, _HealingActionView
from opsconsole.api.serializers.healing import HealingRecordSerializer
from reconcilers.models import HealingRecord, Resource
from reconcilers.services import escalation

RULE = OpenApiParameter("rule", str, OpenApiParameter.PATH,
                        description="the anomaly's rule (`rollback_failed`, or a rule of the kind)")


class AcknowledgeInputSerializer(serializers.Serializer):
    """POST acknowledge: an optional note."""

    note = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="",
                                 help_text="recorded with the healing record")


class AssignInputSerializer(AcknowledgeInputSerializer):
    """POST assign: the username of an operator who can see the resource, and an optional note."""

    assignee = serializers.CharField(max_length=150, help_text="a username (operator role, the resource's namespace)")


class ResolveInputSerializer(serializers.Serializer):
    """POST resolve: what was done (required)."""

    note = serializers.CharField(max_length=1000, help_text="what was done: recorded with the healing record")


class _AnomalyView(_HealingActionView):
    """One escalation step on one anomaly of one resource."""

    step = ""

    def act(self, resource: Resource, data: dict[str, Any], actor: str) -> HealingRecord:
        rule = self._rule
        self._facts["note"] = data.get("note", "")[:1000]
        if self.step == "assign":
            self._facts["assignee"] = data["assignee"]
            why = assignee_refusal(data["assignee"], resource.namespace, resource.cluster)
            if why is not None:
                raise escalation.HealingRefused(why, field="assignee", status=400)
        return escalation.anomaly_step(self.step, resource, rule, actor=actor, note=data.get("note", ""),
                                       assignee=data.get("assignee", ""))

    def post(self, request: Request, pk: str | None = None, rule: str | None = None) -> Response:
        self._rule = rule if rule is not None else getattr(self, "address", {}).get("rule", "")
        self._facts = {"rule": self._rule}
        return super().post(request, pk)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        # the rule, the note and the assignee in the action record, refused and rejected attempts included
        self.audit_detail = {**getattr(self, "_facts", {}), **(getattr(self, "audit_detail", None) or {})}
        return super().finalize_response(request, response, *args, **kwargs)


class AnomalyAcknowledgeView(_AnomalyView):
    """Acknowledge an anomaly that needs a person."""

    audit_action = "anomaly.acknowledge"
    step = "acknowledge"
    input_serializer = AcknowledgeInputSerializer


class AnomalyAssignView(_AnomalyView):
    """Assign an anomaly that needs a person to an operator."""

    audit_action = "anomaly.assign"
    step = "assign"
    input_serializer = AssignInputSerializer


class AnomalyResolveView(_AnomalyView):
    """Resolve an anomaly that needs a person, saying what was done."""

    audit_action = "anomaly.resolve"
    step = "resolve"
    input_serializer = ResolveInputSerializer


#: the views by URL sub-path (under a resource's address)
ACTIONS: dict[str, type[_AnomalyView]] = {
    "anomalies/<str:rule>/acknowledge": AnomalyAcknowledgeView,
    "anomalies/<str:rule>/assign": AnomalyAssignView,
    "anomalies/<str:rule>/resolve": AnomalyResolveView,
}


def _schema(view: type[_AnomalyView], op: str, how: str, params: list[OpenApiParameter]) -> type:
    return extend_schema_view(post=extend_schema(
        operation_id=f"{op}_anomaly_{view.step}", summary=f"{view.step.title()} an anomaly that needs a person, {how}",
        request=view.input_serializer, parameters=[*params, RULE], tags=["healing"],
        responses={202: HealingRecordSerializer, **ACTION_ERRORS}))(view)


BY_ID = {sub: _schema(view, "resources", "by id", []) for sub, view in ACTIONS.items()}


def _by_address(form: str) -> dict[str, type]:
    op, how = by_key.FORMS[form]
    params = by_key.path_parameters(form)
    return {sub: _schema(type(f"{view.__name__}By{form.title()}", (_ActionByAddress, view),
                              {"__doc__": f"{view.__doc__} ({how})"}), op, how, params)
            for sub, view in ACTIONS.items()}


BY_ADDRESS = {form: _by_address(form) for form in by_key.FORMS}
