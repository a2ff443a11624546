"""What if in the API: preview a candidate spec of one resource with the kind's real step, every write a server-side
dry run, nothing stored.

    POST /api/v1/resources/{id}/whatif      {"spec": {...}}  or  {"yaml": "<the spec or the whole object>"}
    (and the same sub-path by Kubernetes key and by uid)

Authorised as a manual reconcile (the operator role, the object's namespace: outside it the object does not exist,
404), throttled, and audited: every attempt appends an ActionRecord (`resource.whatif`) with the spec diff's paths,
the phase it would record and whether admission refused it. 200 with the preview (`refused` with admission's causes
when validation or a webhook would refuse the spec; `dry_run_refused` when the cluster will not dry-run a write).
The logic is `reconcilers.services.whatif`'s.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from opsconsole.accounts.roles import user_namespaces
from opsconsole.api import by_key
from opsconsole.api.actions import ACTION_ERRORS, _valid
from opsconsole.api.audit import AuditedActionView
from opsconsole.api.exceptions import Unavailable
from opsconsole.api.permissions import IsOperator
from opsconsole.api.throttling import ActionThrottle
from reconcilers.models import Resource
from reconcilers.services.selectors.resources import resource_get
from reconcilers.services.whatif import MAX_TEXT, WhatIfError, WhatIfInputError, resource_whatif, spec_from_text


class WhatIfInputSerializer(serializers.Serializer):
    """The candidate: `spec` (an object) or `yaml` (the spec, or the whole object, as YAML or JSON text)."""

    spec = serializers.JSONField(required=False, help_text="the candidate spec")
    yaml = serializers.CharField(required=False, max_length=MAX_TEXT, trim_whitespace=False,
                                 help_text="the candidate spec, or the whole object, as YAML")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=1000, default="",
                                   help_text="why (kept with the action record)")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("spec" in attrs) == ("yaml" in attrs):
            raise serializers.ValidationError({"spec": ["give either spec or yaml"]})
        return attrs


class ChangeSerializer(serializers.Serializer):
    """One field that would change."""

    path = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class VerdictSerializer(serializers.Serializer):
    """What validation and admission answered to one dry-run write."""

    method = serializers.CharField()
    path = serializers.CharField()
    allowed = serializers.BooleanField()
    code = serializers.IntegerField()
    message = serializers.CharField(allow_blank=True)


class ChildDiffSerializer(serializers.Serializer):
    """One child the step would apply, against the live one."""

    kind = serializers.CharField()
    namespace = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    action = serializers.ChoiceField(choices=["create", "update", "unchanged"])
    changes = ChangeSerializer(many=True)
    truncated = serializers.IntegerField(help_text="changes left out past the bound")


class CauseSerializer(serializers.Serializer):
    """One cause of a refusal, as admission gave it."""

    field = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)


class WhatIfSerializer(serializers.Serializer):
    """The preview: nothing of it was stored."""

    key = serializers.CharField()
    spec_diff = ChangeSerializer(many=True)
    recorded_phase = serializers.CharField(allow_blank=True, help_text="the phase on record now")
    phase = serializers.CharField(allow_blank=True, help_text="the phase the run would record")
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    transitions = serializers.ListField(child=serializers.CharField())
    transition_refused = serializers.BooleanField(help_text="the state machine would refuse the change")
    result = serializers.CharField(allow_blank=True, help_text="success, error, requeue or requeue_after")
    queue = serializers.CharField(allow_blank=True, help_text="the queue action the run would take")
    generation = serializers.IntegerField(help_text="the generation the candidate would have")
    children = ChildDiffSerializer(many=True)
    admission = VerdictSerializer(many=True)
    refused = serializers.BooleanField(help_text="validation or admission would refuse the spec")
    causes = CauseSerializer(many=True)
    dry_run_refused = serializers.BooleanField(help_text="the cluster refused to dry-run a write")
    error = serializers.CharField(allow_blank=True)
    previewed_at = serializers.CharField()


class ResourceWhatIfView(AuditedActionView):
    """Preview a candidate spec of one resource (dry run, nothing stored)."""

    permission_classes = [IsOperator]
    throttle_classes = [ActionThrottle]
    audit_action = "resource.whatif"

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "") or f"resource:{kwargs.get('pk', '')}"

    def resource(self, request: Request, pk: str | None) -> Resource:
        """The resource, if the caller may act on it (else 404, as for one that does not exist)."""
        try:
            return resource_get(int(pk or ""), namespaces=user_namespaces(request.user))
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise NotFound("No such object, or it is outside your namespaces.") from exc

    @extend_schema(summary="Preview a candidate spec (dry run: nothing stored)", operation_id="resources_whatif",
                   request=WhatIfInputSerializer, tags=["resources"],
                   responses={200: WhatIfSerializer, **ACTION_ERRORS})
    def post(self, request: Request, pk: str | None = None) -> Response:
        data = _valid(WhatIfInputSerializer, request)
        resource = self.resource(request, pk)
        self._target = resource.key
        try:
            spec = spec_from_text(data["yaml"]) if "yaml" in data else data["spec"]
            preview = resource_whatif(resource, spec)
        except WhatIfInputError as exc:
            raise ValidationError({"yaml" if "yaml" in data else exc.field: [str(exc)]}) from exc
        except WhatIfError as exc:
            if exc.status == 404:
                raise NotFound(str(exc)) from exc
            raise Unavailable(str(exc)) from exc
        self.audit_detail = {"spec_diff": [c.path for c in preview.spec_diff][:50], "phase": preview.phase,
                             "refused": preview.refused, "dry_run_refused": preview.dry_run_refused,
                             "error": preview.error[:500]}
        return Response(WhatIfSerializer(preview.as_dict()).data)


class _WhatIfByAddress(by_key.AddressedAction, ResourceWhatIfView):
    pass


def _by_address(form: str) -> type:
    op, how = by_key.FORMS[form]
    params = by_key.path_parameters(form)
    view = type(f"WhatIfBy{form.title()}View", (_WhatIfByAddress,), {"__doc__": f"Preview a candidate spec {how}."})
    return extend_schema_view(post=extend_schema(
        summary=f"Preview a candidate spec (dry run: nothing stored), {how}", operation_id=f"{op}_whatif",
        request=WhatIfInputSerializer, tags=["resources"], parameters=params,
        responses={200: WhatIfSerializer, **ACTION_ERRORS}))(view)


#: the view under each addressing form (`by_key.FORMS`)
BY_ADDRESS = {form: _by_address(form) for form in by_key.FORMS}
