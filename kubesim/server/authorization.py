"""`authorization.k8s.io/v1` reviews, answered as kube-apiserver answers them in kubesim's authorization mode:

- `SelfSubjectAccessReview` (what `kubectl auth can-i VERB TYPE` asks): may the caller do it;
- `SubjectAccessReview`: may the user and groups in the spec do it;
- `SelfSubjectRulesReview` (`kubectl auth can-i --list`): the caller's rules in a namespace.

Under `RBAC` the answers come from the roles and bindings (kubesim.auth.rbac); under `AlwaysAllow` everything is
allowed and the rules list every verb on everything. Bodies are JSON, YAML or protobuf (kubectl's typed client
sends protobuf; kubesim.protobuf decodes these kinds from their published `.proto` field numbers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import errors
from kubesim.auth.identity import UserInfo
from kubesim.auth.request_info import Attributes
from kubesim.server.http import json_response, read_body, request_user

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

GROUP_VERSION = "authorization.k8s.io/v1"
ALWAYS_ALLOW = "kubesim authorizes every request (--authorization-mode=AlwaysAllow)"


async def _spec(request: web.Request, kind: str) -> dict[str, Any]:
    body = await read_body(request)
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise errors.bad_request(f"a {kind} must be an object")
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise errors.bad_request(f"{kind}.spec must be an object")
    return spec


def _review(kind: str, spec: dict[str, Any], status: dict[str, Any]) -> web.Response:
    return json_response({"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {"creationTimestamp": None},
                          "spec": spec, "status": status}, status=201)


def access_attributes(user: UserInfo, spec: dict[str, Any]) -> Attributes:
    """The attributes a review's `resourceAttributes` or `nonResourceAttributes` describe (400 with neither)."""
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(resource, dict) and resource:
        return Attributes(user, str(resource.get("verb") or ""), True, api_group=str(resource.get("group") or ""),
                          api_version=str(resource.get("version") or ""),
                          namespace=str(resource.get("namespace") or ""),
                          resource=str(resource.get("resource") or ""),
                          subresource=str(resource.get("subresource") or ""), name=str(resource.get("name") or ""))
    if isinstance(non_resource, dict) and non_resource:
        return Attributes(user, str(non_resource.get("verb") or ""), False, path=str(non_resource.get("path") or ""))
    raise errors.invalid("SelfSubjectAccessReview", GROUP_VERSION.split("/")[0], "", [errors.cause(
        "spec.resourceAttributes", "FieldValueRequired",
        "exactly one of nonResourceAttributes or resourceAttributes must be specified")])


def _decide(sim: Simulator, attrs: Attributes) -> dict[str, Any]:
    if sim.authorizer is None:
        return {"allowed": True, "reason": ALWAYS_ALLOW}
    allowed, reason = sim.authorizer.authorize(attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return status


def add_authorization_routes(app: web.Application, sim: Simulator) -> None:
    """The three review endpoints, ahead of the generic resource handler."""

    async def self_subject_access_review(request: web.Request) -> web.Response:
        spec = await _spec(request, "SelfSubjectAccessReview")
        attrs = access_attributes(request_user(request), spec)
        return _review("SelfSubjectAccessReview", spec, _decide(sim, attrs))

    async def subject_access_review(request: web.Request) -> web.Response:
        spec = await _spec(request, "SubjectAccessReview")
        if not spec.get("user") and not spec.get("groups"):
            raise errors.invalid("SubjectAccessReview", "authorization.k8s.io", "", [errors.cause(
                "spec.user", "FieldValueRequired", "at least one of user or group must be specified")])
        subject = UserInfo(str(spec.get("user") or ""), str(spec.get("uid") or ""),
                           tuple(str(g) for g in spec.get("groups") or []))
        return _review("SubjectAccessReview", spec, _decide(sim, access_attributes(subject, spec)))

    async def self_subject_rules_review(request: web.Request) -> web.Response:
        spec = await _spec(request, "SelfSubjectRulesReview")
        user: UserInfo = request_user(request)
        if sim.authorizer is None:
            rules = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                     {"verbs": ["*"], "nonResourceURLs": ["*"]}]
        else:
            rules = sim.authorizer.rules_for(user, str(spec.get("namespace") or ""))
        resource_rules = [{key: list(rule.get(key) or []) for key in ("verbs", "apiGroups", "resources",
                                                                        "resourceNames") if rule.get(key)}
                          for rule in rules if not rule.get("nonResourceURLs")]
        non_resource_rules = [{"verbs": list(rule.get("verbs") or []),
                               "nonResourceURLs": list(rule["nonResourceURLs"])}
                              for rule in rules if rule.get("nonResourceURLs")]
        return _review("SelfSubjectRulesReview", spec, {"resourceRules": resource_rules,
                                                        "nonResourceRules": non_resource_rules,
                                                        "incomplete": False})

    base = f"/apis/{GROUP_VERSION}"
    app.router.add_post(f"{base}/selfsubjectaccessreviews", self_subject_access_review)
    app.router.add_post(f"{base}/subjectaccessreviews", subject_access_review)
    app.router.add_post(f"{base}/selfsubjectrulesreviews", self_subject_rules_review)

