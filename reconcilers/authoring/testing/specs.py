"""The spec a test gives, applied to the sandbox cluster: create, replace or patch an object's spec, and
`SpecRejected` when the API server (the CRD's schema) refuses it.

`SpecWriter` remembers, per object, the spec the test last gave: `reconcile_once(obj)` / `reconcile_until(obj, ...)`
write `obj["spec"]` when it differs from that one (the first time: from the live object's), as `kubectl apply`
does; a change made meanwhile through the API (a test patching the object as a user would) is kept as long as
the test passes the same spec again. `update_spec(obj, **changes)` merge-patches the live spec (a value of None
removes the field) and changes `obj["spec"]` in place, so passing `obj` again keeps the change. No Django here.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube

#: how often a spec replace is retried when the object moved on in between (409 Conflict)
CONFLICT_RETRIES = 5


class SpecRejected(ValueError):
    """The API server refused to create or update an object: the CRD's schema (400 BadRequest or 422 Invalid)
    checks the spec before any reconcile. `.fields` names each refused field (e.g. `["spec.replicas"]`),
    `.causes` holds the server's `details.causes`, `.kind`, `.name` and `.action` ("create", "update") say what
    was refused. A `ValueError`, as before this type existed."""

    def __init__(self, action: str, kind: str, name: str, message: str, causes: list[dict[str, Any]]) -> None:
        self.action = action
        self.kind = kind
        self.name = name
        self.causes = causes
        self.fields = [str(c["field"]) for c in causes if c.get("field")]
        self.server_message = message
        fields = f"refused fields: {', '.join(self.fields)}; " if self.fields else ""
        super().__init__(f"the API server refused to {action} {kind} {name}: {message} "
                         f"({fields}the CRD's schema checks this, before any reconcile)")


def rejected(exc: kube.ApiException, action: str, kind: str, name: str) -> SpecRejected | None:
    """The `SpecRejected` an API error means (400 or 422), else None."""
    if exc.status not in (400, 422):
        return None
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        body = {}
    body = body if isinstance(body, dict) else {}
    causes = (body.get("details") or {}).get("causes") or []
    return SpecRejected(action, kind, name, str(body.get("message") or exc.reason), list(causes))


def _key(resource: ResourceKind, obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") if resource.namespaced else None
    return (resource.api_version, resource.kind, str(namespace or ""), str(meta["name"]))


def _merge(spec: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`spec` with `changes` merged in as a JSON merge patch does (None removes a field)."""
    out = dict(spec)
    for field, value in changes.items():
        if value is None:
            out.pop(field, None)
        elif isinstance(value, dict) and isinstance(out.get(field), dict):
            out[field] = _merge(out[field], value)
        else:
            out[field] = copy.deepcopy(value)
    return out


class SpecWriter:
    """Writes the specs one test gives to one cluster, remembering the last one given per object."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.given: dict[tuple[str, str, str, str], Any] = {}

    def live(self, resource: ResourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        """The live object named by `obj`: created from it when missing, its spec replaced by `obj["spec"]` when
        that differs from the spec last given (the first time: from the live spec). SpecRejected when refused."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") if resource.namespaced else None
        key = _key(resource, obj)
        live = kube.get_object(self.api, resource, namespace, meta["name"])
        if live is None:
            try:
                live, created = kube.ensure_object(self.api, resource, obj, namespace)
            except kube.ApiException as exc:
                raise (rejected(exc, "create", resource.kind, meta["name"]) or exc) from exc
            if created:
                self.given[key] = copy.deepcopy(obj.get("spec"))
                return live
        if "spec" in obj:
            last = self.given.get(key, live.get("spec"))
            if obj["spec"] != last:
                live = self._replace_spec(resource, live, obj["spec"])
            self.given[key] = copy.deepcopy(obj["spec"])
        return live

    def _replace_spec(self, resource: ResourceKind, live: dict[str, Any], spec: Any) -> dict[str, Any]:
        meta = live["metadata"]
        for _ in range(CONFLICT_RETRIES):
            try:
                return kube.replace_object(self.api, resource, {**live, "spec": copy.deepcopy(spec)})
            except kube.ApiException as exc:
                if exc.status != 409:
                    raise (rejected(exc, "update", resource.kind, meta["name"]) or exc) from exc
            fresh = kube.get_object(self.api, resource, meta.get("namespace"), meta["name"])
            if fresh is None:
                raise LookupError(f"{resource.kind} {meta['name']} was deleted while its spec was being replaced")
            live = fresh
        raise RuntimeError(f"{resource.kind} {meta['name']} kept changing: its spec could not be replaced")

    def update(self, resource: ResourceKind, obj: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch `changes` into the live object's spec (a value of None removes the field), as `kubectl
        patch --type merge` does; `obj["spec"]` is changed in place the same way, and remembered as the spec last
        given. The live object after the patch; SpecRejected when refused, LookupError when it does not exist."""
        if not changes:
            raise ValueError("update_spec needs at least one field to change, e.g. update_spec(obj, replicas=3)")
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") if resource.namespaced else None
        try:
            live = kube.patch_object(self.api, resource, namespace, meta["name"], {"spec": changes})
        except kube.ApiException as exc:
            if exc.status == 404:
                raise LookupError(f"{resource.kind} {meta['name']} does not exist (reconcile it first)") from exc
            raise (rejected(exc, "update", resource.kind, meta["name"]) or exc) from exc
        obj["spec"] = _merge(obj.get("spec") or {}, changes)
        self.given[_key(resource, obj)] = copy.deepcopy(obj["spec"])
        return live
