"""`authorization.k8s.io/v1` reviews as kube-apiserver answers them under `--authorization-mode=AlwaysAllow`, the
mode kubesim runs in: `SelfSubjectAccessReview` and `SubjectAccessReview` (what `kubectl auth can-i VERB TYPE`
asks) are allowed, and `SelfSubjectRulesReview` (`kubectl auth can-i --list`) lists every verb on everything.

The answer does not depend on the question, so a request body is read only to echo its JSON spec back; a protobuf
body (kubectl's typed client sends one) is not decoded and the spec comes back empty (kubectl reads `status` only).
RBAC authorization (roles, bindings, 403 Forbidden) is not modelled yet: see the README's limits.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from kubesim.server.http import json_response

GROUP_VERSION = "authorization.k8s.io/v1"
REASON = "kubesim authorizes every request (AlwaysAllow: it models no RBAC)"


async def _spec(request: web.Request) -> dict[str, Any]:
    if "json" not in (request.content_type or ""):
        return {}
    try:
        body = json.loads(await request.read() or b"{}")
    except ValueError:
        return {}
    spec = body.get("spec") if isinstance(body, dict) else None
    return spec if isinstance(spec, dict) else {}


def _review(kind: str, spec: dict[str, Any], status: dict[str, Any]) -> web.Response:
    return json_response({"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {"creationTimestamp": None},
                          "spec": spec, "status": status}, status=201)


async def self_subject_access_review(request: web.Request) -> web.Response:
    """POST selfsubjectaccessreviews: allowed."""
    return _review("SelfSubjectAccessReview", await _spec(request), {"allowed": True, "reason": REASON})


async def subject_access_review(request: web.Request) -> web.Response:
    """POST subjectaccessreviews: allowed."""
    return _review("SubjectAccessReview", await _spec(request), {"allowed": True, "reason": REASON})


async def self_subject_rules_review(request: web.Request) -> web.Response:
    """POST selfsubjectrulesreviews: every verb on every resource and non-resource URL."""
    return _review("SelfSubjectRulesReview", await _spec(request), {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": False,
    })


def add_authorization_routes(app: web.Application) -> None:
    """The three review endpoints, ahead of the generic resource handler."""
    base = f"/apis/{GROUP_VERSION}"
    app.router.add_post(f"{base}/selfsubjectaccessreviews", self_subject_access_review)
    app.router.add_post(f"{base}/subjectaccessreviews", subject_access_review)
    app.router.add_post(f"{base}/selfsubjectrulesreviews", self_subject_rules_review)
