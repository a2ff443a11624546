"""Accounts endpoints: who am I, API tokens (the user's own; admins: other users' within their namespaces), and
the action record (admins; an admin limited to namespaces sees the records about them: `action_record_list`).
Creating and revoking a token are audited actions; a token creates no token above its own role cap or past its
own expiry (`token_mint_limits`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.accounts.action_records import action_record_list
from opsconsole.accounts.models import ApiToken
from opsconsole.accounts.roles import ADMIN, user_covers, user_has_role, user_namespaces, user_role
from opsconsole.accounts.tokens import TokenError, token_create, token_list, token_may_manage, token_revoke
from opsconsole.api.actions import ACTION_ERRORS
from opsconsole.api.audit import AuditedActionView
from opsconsole.api.pagination import NewestFirstPagination
from opsconsole.api.permissions import IsAdmin
from opsconsole.api.reads import ERRORS, _query
from opsconsole.api.serializers.accounts import (
    ActionQuerySerializer,
    ActionRecordSerializer,
    IssuedTokenSerializer,
    MeSerializer,
    TokenCreateInputSerializer,
    TokenQuerySerializer,
    TokenSerializer,
)
from opsconsole.api.throttling import ActionThrottle
from reconcilers.services.selectors.scope import grant_text


class MeView(APIView):
    """The caller: username, role, namespace limit, how authenticated."""

    @extend_schema(summary="Who am I", responses={200: MeSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        limit = user_namespaces(request.user)
        body = {
            "username": request.user.get_username(),
            "role": user_role(request.user),
            "namespaces": sorted(grant_text(c, ns) for c, ns in limit.pairs) if limit is not None else None,
            "auth": "token" if isinstance(request.auth, ApiToken) else "session",
        }
        return Response(MeSerializer(body).data)


class TokenListCreateView(AuditedActionView):
    """GET: the caller's tokens (admins: `all` or `username`). POST: create one; its secret is shown once."""

    audit_action = "token.create"
    throttle_classes = [ActionThrottle]

    def get_throttles(self) -> list[Any]:
        return super().get_throttles() if self.request.method == "POST" else []

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if request.method == "GET":  # a read: not an action
            return super(AuditedActionView, self).finalize_response(request, response, *args, **kwargs)
        return super().finalize_response(request, response, *args, **kwargs)

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        return getattr(self, "_target", "")

    @extend_schema(summary="API tokens", parameters=[TokenQuerySerializer],
                   responses={200: TokenSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        q = _query(TokenQuerySerializer, request)
        if (q["all"] or q.get("username")) and not user_has_role(request.user, ADMIN):
            raise PermissionDenied("Listing other users' tokens needs the admin role.")
        qs = token_list(None if q["all"] else request.user, covered_by=request.user)
        if q.get("username") and not q["all"]:
            qs = token_list(None, covered_by=request.user).filter(user__username=q["username"])
        return Response(TokenSerializer(qs[:500], many=True).data)

    @extend_schema(summary="Create an API token (shown once)", request=TokenCreateInputSerializer,
                   responses={201: IssuedTokenSerializer, **ACTION_ERRORS})
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["the body must be a JSON object"]})
        ser = TokenCreateInputSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        user = request.user
        if data.get("username") and data["username"] != user.get_username():
            if not user_has_role(user, ADMIN):
                raise PermissionDenied("Creating tokens for other users needs the admin role.")
            try:
                user = get_user_model().objects.get(username=data["username"])
            except get_user_model().DoesNotExist as exc:
                raise ValidationError({"username": ["no such user"]}) from exc
            if not user_covers(request.user, user):
                raise PermissionDenied("That user sees namespaces outside yours: you cannot create tokens for them.")
        self._target = f"user:{user.get_username()}"
        days = data.get("expires_in_days")
        try:
            issued = token_create(user, name=data["name"], description=data["description"], role=data["role"],
                                  expires_at=timezone.now() + timedelta(days=days) if days else None,
                                  via=request.auth if isinstance(request.auth, ApiToken) else None,
                                  expiry_field="expires_in_days")
        except TokenError as exc:
            if exc.status == 403:
                raise PermissionDenied({exc.field: [exc.message]} if exc.field else exc.message) from exc
            raise ValidationError({exc.field or "non_field_errors": [exc.message]}) from exc
        self.audit_detail = {"token_id": issued.token.pk, "prefix": issued.token.prefix}
        body = {**TokenSerializer(issued.token).data, "token": issued.secret}
        return Response(body, status=status.HTTP_201_CREATED)


class TokenRevokeView(AuditedActionView):
    """Revoke a token: the user's own, or anyone's for admins."""

    audit_action = "token.revoke"
    throttle_classes = [ActionThrottle]

    @extend_schema(summary="Revoke an API token", responses={204: None, **ACTION_ERRORS})
    def delete(self, request: Request, pk: str) -> Response:
        try:
            token = ApiToken.objects.select_related("user").get(pk=int(pk))
        except (ValueError, OverflowError, ApiToken.DoesNotExist) as exc:
            raise NotFound("No such token.") from exc
        if not token_may_manage(request.user, token):
            raise NotFound("No such token.")  # another user's token does not exist for whoever may not revoke it
        token_revoke(token)
        self.audit_detail = {"prefix": token.prefix, "owner": token.user.get_username()}
        return Response(status=status.HTTP_204_NO_CONTENT)


class ActionRecordListView(generics.ListAPIView):
    """The action record (admins): every action asked of the API, newest first; an admin limited to namespaces
    sees the records about objects in them and about themselves (`action_record_visible`)."""

    permission_classes = [IsAdmin]
    serializer_class = ActionRecordSerializer
    pagination_class = NewestFirstPagination

    def get_queryset(self) -> Any:
        q = _query(ActionQuerySerializer, self.request)
        return action_record_list(**{k: v for k, v in q.items() if v}, namespaces=user_namespaces(self.request.user),
                                  username=self.request.user.get_username())

    @extend_schema(summary="The action record (admin)", parameters=[ActionQuerySerializer],
                   responses={200: ActionRecordSerializer(many=True), **ERRORS})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
