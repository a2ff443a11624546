"""Action endpoints (the HackSoft styleguide's way): an APIView with an input serializer that calls one
service and answers with an output serializer. Every one is audited (see `opsconsole.api.audit`) and
throttled per user. A resource addressed by id outside the caller's namespaces is a 404, as one that does not
exist; a namespace the caller names (a bulk reconcile's, a queue key's) outside them is a 403."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from opsconsole.accounts.roles import namespace_allowed, user_namespaces
from opsconsole.api.audit import AuditedActionView
from opsconsole.api.exceptions import Conflict, Unavailable
from opsconsole.api.permissions import IsAdmin, IsOperator
from opsconsole.api.serializers.common import ErrorSerializer
from opsconsole.api.serializers.reconcile_requests import (
    BulkOutcomeSerializer,
    BulkReconcileInputSerializer,
    ReconcileInputSerializer,
    ReconcileRequestSerializer,
)
from opsconsole.api.serializers.workqueue import QueueControlSerializer, QueueKeyInputSerializer
from opsconsole.api.throttling import ActionThrottle
from reconcilers.models import Resource
from reconcilers.services import queue_controls
from reconcilers.services.reconcile_actions import (
    IdempotencyConflict,
    ObjectNotFound,
    ReconcileRequestError,
    resource_reconcile,
    resource_reconcile_bulk,
)
from reconcilers.services.selectors.resources import resource_get

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="repeat a request safely: the same key from the same user returns the first answer")
_IDEMPOTENCY_RE = re.compile(r"^[\x21-\x7e]{1,200}$")
ACTION_ERRORS = {code: OpenApiResponse(ErrorSerializer, description=text) for code, text in (
    (400, "invalid input: `fields` names each bad field"), (401, "not authenticated"),
    (403, "the role or namespace does not allow it"), (404, "not found"),
    (409, "conflict (idempotency key used for another object)"), (429, "throttled: see Retry-After"),
    (503, "the Kubernetes API or Redis did not answer"),
)}


def actor_of(request: Request) -> str:
    """The actor recorded for the user: `user:<username>`."""
    return f"user:{request.user.get_username()}"


def idempotency_key(request: Request) -> str | None:
    """The Idempotency-Key header, checked (printable ASCII, at most 200 characters)."""
    value = request.headers.get("Idempotency-Key")
    if value is None or value == "":
        return None
    if not _IDEMPOTENCY_RE.match(value):
        raise ValidationError({"Idempotency-Key": ["must be 1-200 printable ASCII characters without spaces"]})
    return value


def _valid(serializer_class: type, request: Request) -> dict[str, Any]:
    ser = serializer_class(data=request.data if isinstance(request.data, dict) else {})
    if not isinstance(request.data, dict):
        raise ValidationError({"non_field_errors": ["the body must be a JSON object"]})
    ser.is_valid(raise_exception=True)
    return dict(ser.validated_data)


class ResourceReconcileView(AuditedActionView):
    """Ask for a reconcile of one resource now."""

    permission_classes = [IsOperator]
    throttle_classes = [ActionThrottle]
    audit_action = "resource.reconcile"

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "") or f"resource:{kwargs.get('pk', '')}"

    def resource(self, request: Request, pk: str | None) -> Resource:
        """The resource asked for, which the caller may act on: NotFound otherwise, the same answer for an id
        outside the caller's namespaces as for one that does not exist (an id must not tell a namespace; the
        record's target stays `resource:<id>` for it)."""
        try:
            resource = resource_get(int(pk or ""), namespaces=user_namespaces(request.user))
        except (ValueError, OverflowError, Resource.DoesNotExist) as exc:
            raise NotFound("No such object, or it is outside your namespaces.") from exc
        self._target = resource.key
        return resource

    @extend_schema(summary="Request a reconcile of one resource", request=ReconcileInputSerializer,
                   operation_id="resources_reconcile",
                   parameters=[IDEMPOTENCY_HEADER],
                   responses={202: ReconcileRequestSerializer, **ACTION_ERRORS})
    def post(self, request: Request, pk: str | None = None) -> Response:
        data = _valid(ReconcileInputSerializer, request)
        key = idempotency_key(request)
        resource = self.resource(request, pk)
        self._target = resource.key
        try:
            req = resource_reconcile(resource, actor=actor_of(request), reason=data["reason"], idempotency_key=key)
        except IdempotencyConflict as exc:
            raise Conflict(str(exc)) from exc
        except ObjectNotFound as exc:
            raise NotFound(f"The object is no longer in the cluster: {exc}") from exc
        except ReconcileRequestError as exc:
            raise Unavailable(str(exc)) from exc
        except Exception as exc:  # the Kubernetes API or Redis did not answer
            raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
        self.audit_detail = {"request_id": str(req.pk), "token": req.token}
        return Response(ReconcileRequestSerializer(req).data, status=status.HTTP_202_ACCEPTED)


class BulkReconcileView(AuditedActionView):
    """Ask for a reconcile of every visible resource of a kind matching a selector and/or a phase."""

    permission_classes = [IsOperator]
    throttle_classes = [ActionThrottle]
    audit_action = "resource.reconcile_bulk"

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "")

    @extend_schema(summary="Request reconciles in bulk (partial failures reported)",
                   operation_id="resources_reconcile_bulk",
                   request=BulkReconcileInputSerializer, parameters=[IDEMPOTENCY_HEADER],
                   responses={202: BulkOutcomeSerializer, **ACTION_ERRORS})
    def post(self, request: Request) -> Response:
        data = _valid(BulkReconcileInputSerializer, request)
        key = idempotency_key(request)
        where = f" cluster={data['cluster']}" if data["cluster"] else ""  # before ns=: the record's visibility
        self._target = (f"kind={data['kind']}{where} selector={data['selector']} phase={data['phase']} "
                        f"ns={data['namespace']}")
        limit = user_namespaces(request.user)  # a namespace of any cluster the caller has (the Scope limits each)
        if data["namespace"] and limit is not None and data["namespace"] not in limit:
            raise PermissionDenied(f"Namespace {data['namespace']} is outside your namespaces.")
        outcome = resource_reconcile_bulk(
            kind=data["kind"], selector=data["selector"], phase=data["phase"], namespace=data["namespace"],
            namespaces=user_namespaces(request.user), actor=actor_of(request), reason=data["reason"],
            cluster=data["cluster"],
            idempotency_key=key, max_items=int(getattr(settings, "OPSCONSOLE_API_BULK_MAX", 500)),
        )
        self.audit_cluster = data["cluster"]  # a valid name by now (the selector refuses a bad one)
        self.audit_detail = {"matched": outcome.matched, "requested": [str(r.pk) for r in outcome.requested],
                             "failed": [f.resource.key for f in outcome.failed]}
        body = {
            "matched": outcome.matched,
            "requested": outcome.requested,
            "failed": [{"resource_id": f.resource.pk, "key": f.resource.key, "code": f.code, "error": f.error}
                       for f in outcome.failed],
        }
        return Response(BulkOutcomeSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class _QueueControlView(AuditedActionView):
    permission_classes = [IsAdmin]
    throttle_classes = [ActionThrottle]

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "")

    def control(self, key: str) -> queue_controls.QueueControlResult:
        raise NotImplementedError

    def post(self, request: Request) -> Response:
        data = _valid(QueueKeyInputSerializer, request)
        self._target = data["key"]
        req = queue_controls.queue_key_parse(data["key"])
        if not namespace_allowed(request.user, req.namespace, req.cluster):
            raise PermissionDenied(f"Namespace {req.namespace or '(cluster scope)'} is outside your namespaces.")
        result = self.control(data["key"])
        self.audit_detail = {"changed": result.changed, "failures_before": result.failures_before}
        return Response(QueueControlSerializer(result).data)


class QueueRetryNowView(_QueueControlView):
    """Admin: reconcile a backing-off or delayed key now."""

    audit_action = "queue.retry_now"

    def control(self, key: str) -> queue_controls.QueueControlResult:
        return queue_controls.queue_retry_now(key)

    @extend_schema(summary="Retry a backing-off key now (admin)", request=QueueKeyInputSerializer,
                   responses={200: QueueControlSerializer, **ACTION_ERRORS})
    def post(self, request: Request) -> Response:
        return super().post(request)


class QueueResetBackoffView(_QueueControlView):
    """Admin: reset a key's backoff."""

    audit_action = "queue.reset_backoff"

    def control(self, key: str) -> queue_controls.QueueControlResult:
        return queue_controls.queue_reset_backoff(key)

    @extend_schema(summary="Reset a key's backoff (admin)", request=QueueKeyInputSerializer,
                   responses={200: QueueControlSerializer, **ACTION_ERRORS})
    def post(self, request: Request) -> Response:
        return super().post(request)
