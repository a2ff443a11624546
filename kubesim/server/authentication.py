"""`authentication.k8s.io/v1` as kube-apiserver serves it to clients:

- `TokenRequest` (`POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`, what `kubectl create token NAME`
  sends): a bearer token for a stored ServiceAccount, valid for `spec.expirationSeconds` (default 3600, at least
  600 as kube-apiserver requires) or until the account is deleted;
- `SelfSubjectReview` (`kubectl auth whoami`): who the caller is.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import errors
from kubesim.auth.identity import DEFAULT_SA_TOKEN_SECONDS, UserInfo
from kubesim.meta import now
from kubesim.server.http import json_response, read_body, request_user

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

MIN_EXPIRATION_SECONDS = 600


def _expiration(spec: dict[str, Any]) -> int:
    raw = spec.get("expirationSeconds")
    if raw in (None, ""):
        return DEFAULT_SA_TOKEN_SECONDS
    try:
        seconds = int(raw)
    except (TypeError, ValueError):
        seconds = -1
    if seconds < MIN_EXPIRATION_SECONDS:
        raise errors.invalid("TokenRequest", "authentication.k8s.io", "", [errors.cause(
            "spec.expirationSeconds", "FieldValueInvalid",
            f"may not specify a duration less than {MIN_EXPIRATION_SECONDS} seconds")])
    return seconds


def add_authentication_routes(app: web.Application, sim: Simulator) -> None:
    """The TokenRequest subresource and SelfSubjectReview, ahead of the generic resource handler."""

    async def token_request(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        body = await read_body(request) or {}
        spec = body.get("spec") if isinstance(body, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        uid = sim.service_account_uid(namespace, name)
        if uid is None:
            raise errors.not_found("serviceaccounts", "", name)
        audiences = tuple(str(a) for a in spec.get("audiences") or [])
        seconds = _expiration(spec)
        token, expires = sim.authenticator.issue(namespace, name, uid, seconds=seconds, audiences=audiences)
        stamp = datetime.fromtimestamp(expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json_response({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now()},
            "spec": {"audiences": list(audiences), "expirationSeconds": seconds, "boundObjectRef": None},
            "status": {"token": token, "expirationTimestamp": stamp},
        }, status=201)

    async def self_subject_review(request: web.Request) -> web.Response:
        user: UserInfo = request_user(request)
        return json_response({"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                              "metadata": {"creationTimestamp": now()},
                              "status": {"userInfo": user.to_json()}}, status=201)

    app.router.add_post("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", token_request)
    app.router.add_post("/apis/authentication.k8s.io/v1/selfsubjectreviews", self_subject_review)
