"""Token authentication for scripts: `Authorization: Bearer oc_…` (or `Token oc_…`), checked against the
stored sha256 (see `opsconsole.accounts.tokens`). A refused token answers 401 with a code saying why
(`token_invalid`, `token_expired`, `token_revoked`); a token with a role acts with at most that role. The
console uses Django sessions (DRF's SessionAuthentication, with its CSRF check)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from opsconsole.accounts.tokens import token_authenticate, token_refusal, token_role_cap


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Per-user API tokens sent as `Authorization: Bearer <token>`."""

    keywords = ("bearer", "token")

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        try:
            secret = header[1].decode()
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("The token is not valid.") from exc
        token = token_authenticate(secret)
        if token is None:
            code, message = token_refusal(secret)
            raise exceptions.AuthenticationFailed(message, code=code)
        token_role_cap(token)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describe the token scheme in the OpenAPI document."""

    target_class = BearerTokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "a per-user API token (oc_…)"}
