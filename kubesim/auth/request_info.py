"""A request's authorization attributes, derived from its method, path and query as kube-apiserver's
RequestInfoFactory derives them (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`):

- `/api/v1/...` and `/apis/GROUP/VERSION/...` are resource requests: namespace (from `namespaces/NS/...`; for
  the `namespaces` resource itself the name is the namespace), resource, name, subresource;
- the verb from the method: GET/HEAD → `get` (named) or `list` (`watch` with `?watch=true`), POST → `create`,
  PUT → `update`, PATCH → `patch`, DELETE → `delete` (named) or `deletecollection`;
- anything else (`/api`, `/apis/GROUP`, `/version`, `/openapi/v3`, `/healthz`) is a non-resource request whose
  verb is the lower-cased method (`get`, `post`, …) and whose path is the URL path.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesim.auth.identity import UserInfo

_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class Attributes:
    """What one request asks to do, for the authorizer."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def qualified_resource(self) -> str:
        """`deployments.apps`, `pods`: the resource as Status messages name it."""
        return f"{self.resource}.{self.api_group}" if self.api_group else self.resource


def split_resource_path(path: str) -> tuple[str, str, list[str]] | None:
    """(group, version, the segments after them) of a resource path `/api/v1/...` or `/apis/GROUP/VERSION/...`;
    None for any other path."""
    parts = [p for p in path.split("/") if p]
    if parts and parts[0] == "api" and len(parts) >= 3:
        return "", parts[1], parts[2:]
    if parts and parts[0] == "apis" and len(parts) >= 4:
        return parts[1], parts[2], parts[3:]
    return None


def request_attributes(user: UserInfo, method: str, path: str, watch: bool = False) -> Attributes:
    """The attributes of `method path` made by `user` (`watch`: the `watch` query flag was set)."""
    split = split_resource_path(path)
    if split is None:
        return Attributes(user, method.lower(), False, path=path or "/")
    group, version, rest = split
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD"):
        verb = "get" if name else ("watch" if watch else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return Attributes(user, verb, True, path=path, api_group=group, api_version=version, namespace=namespace,
                      resource=resource, subresource=subresource, name=name)


def forbidden_message(attrs: Attributes) -> str:
    """kube-apiserver's `forbiddenMessage` wrapped as `NewForbidden` does: `pods is forbidden: User "alice"
    cannot list resource "pods" in API group "" in the namespace "default"`."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    reason = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'
    subject = attrs.qualified_resource + (f' "{attrs.name}"' if attrs.name else "")
    return f"{subject} is forbidden: {reason}"
