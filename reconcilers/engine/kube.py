"""The Kubernetes client the engine uses, and small generic helpers over any `ResourceKind`: the objects (get, list,
create, replace, patch, apply, delete, ensure) and discovery (`kind_for`, `crd_served`). Callers import them all from
here; each concern beneath lives in its own module:

- `kube_client`: `build_api_client(kubeconfig)` builds a client from a kubeconfig file (None: the in-cluster service
  account), and `_send` sends a request as the client's `call_api` does (its configuration, auth and TLS) through
  the client's connection pool. The process's shared client, configured from the settings, is
  `reconcilers.engine.apiclient.get_api_client()`.
- `kube_rest`: REST paths and `request_json`; every request goes through its `_raw`, the one place that counts
  `rest_client_requests_total{code,method,host}` and, inside a recording span (a reconcile, a web request), opens a
  child span per API call; outside one (informer watches, lease renewals) no span is started, so idle loops leave
  no traces.
- `kube_watch`: watches (`watch_objects`, `WatchStream`).

These modules import no Django: the reconcile step and the benchmarks use them as they are. The helpers speak plain
REST and hand back the JSON as dicts, so core, apps and custom resources go through the same code and the engine
never knows whether it talks to kubesim or to a real cluster. Errors are the client's `ApiException`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.kube_client import DEFAULT_TIMEOUT, Timeout, build_api_client
from reconcilers.engine.kube_rest import collection_path, object_path, request_json, server_version
from reconcilers.engine.kube_watch import ResourceExpired, WatchError, WatchEvent, WatchStream, watch_objects

__all__ = [
    "ApiException",
    "ListResult",
    "ResourceExpired",
    "WatchError",
    "WatchEvent",
    "WatchStream",
    "apply_object",
    "build_api_client",
    "collection_path",
    "create_object",
    "crd_served",
    "delete_object",
    "ensure_object",
    "get_object",
    "kind_for",
    "list_objects",
    "object_path",
    "patch_object",
    "replace_object",
    "request_json",
    "server_version",
    "watch_objects",
]

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply; a JSON body is valid YAML

# -- objects ----------------------------------------------------------------------------------------------


@dataclass
class ListResult:
    """A list's items and the list's resourceVersion (where a watch resumes from)."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""


def get_object(
    api: k8s.ApiClient, kind: ResourceKind, namespace: str | None, name: str, *, timeout: Timeout = DEFAULT_TIMEOUT
) -> dict[str, Any] | None:
    """One object, or None when it does not exist."""
    try:
        return request_json(api, "GET", object_path(kind, namespace, name), timeout=timeout)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def list_objects(
    api: k8s.ApiClient,
    kind: ResourceKind,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
    resource_version: str | None = None,
    timeout: Timeout = (5.0, 60.0),
) -> ListResult:
    """One page of a list (all pages when `limit` is None and the server does not paginate)."""
    body = request_json(
        api,
        "GET",
        collection_path(kind, namespace),
        query={
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
            "resourceVersion": resource_version,
        },
        timeout=timeout,
    )
    meta = body.get("metadata") or {}
    items = body.get("items") or []
    for item in items:  # list items carry no apiVersion/kind; give them back, as the client libraries do
        item.setdefault("apiVersion", kind.api_version)
        item.setdefault("kind", kind.kind)
    return ListResult(items, str(meta.get("resourceVersion") or ""), str(meta.get("continue") or ""))


def create_object(
    api: k8s.ApiClient,
    kind: ResourceKind,
    obj: dict[str, Any],
    namespace: str | None = None,
    *,
    timeout: Timeout = DEFAULT_TIMEOUT,
    field_manager: str | None = None,
) -> dict[str, Any]:
    """POST a new object (namespace from the argument or its metadata). Raises ApiException (409 exists).
    `field_manager` names the writer in the object's managedFields (the server's default otherwise)."""
    ns = namespace or (obj.get("metadata") or {}).get("namespace")
    return request_json(api, "POST", collection_path(kind, ns if kind.namespaced else None), body=obj, timeout=timeout,
                        query={"fieldManager": field_manager} if field_manager else None)


def replace_object(
    api: k8s.ApiClient, kind: ResourceKind, obj: dict[str, Any], *, timeout: Timeout = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """PUT the whole object; its metadata.resourceVersion makes it conditional (409 when it moved on)."""
    meta = obj["metadata"]
    return request_json(api, "PUT", object_path(kind, meta.get("namespace"), meta["name"]), body=obj, timeout=timeout)


def patch_object(
    api: k8s.ApiClient, kind: ResourceKind, namespace: str | None, name: str, patch: dict[str, Any],
    *, field_manager: str | None = None,
) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) of the object. Put metadata.resourceVersion in it for a conditional one.
    `field_manager` names the writer in the object's managedFields (the server's default otherwise)."""
    return request_json(api, "PATCH", object_path(kind, namespace, name), body=patch, content_type=MERGE_PATCH,
                        query={"fieldManager": field_manager} if field_manager else None)


def apply_object(
    api: k8s.ApiClient,
    kind: ResourceKind,
    namespace: str | None,
    name: str,
    manifest: dict[str, Any],
    *,
    field_manager: str,
    force: bool = True,
) -> dict[str, Any]:
    """Server-side apply: `manifest` is `field_manager`'s whole applied configuration of the object (created
    when missing; fields the manager applied before and no longer does are removed). `force` takes over
    fields another manager set. The client sends the dict as JSON text, which is valid YAML."""
    return request_json(api, "PATCH", object_path(kind, namespace, name),
                        query={"fieldManager": field_manager, "force": force}, body=manifest,
                        content_type=APPLY_PATCH)


def delete_object(
    api: k8s.ApiClient,
    kind: ResourceKind,
    namespace: str | None,
    name: str,
    *,
    propagation_policy: str | None = "Background",
) -> bool:
    """Delete one object; False when it was already gone."""
    body = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation_policy:
        body["propagationPolicy"] = propagation_policy
    try:
        request_json(api, "DELETE", object_path(kind, namespace, name), body=body)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def ensure_object(
    api: k8s.ApiClient, kind: ResourceKind, obj: dict[str, Any], namespace: str | None = None,
    *, field_manager: str | None = None,
) -> tuple[dict[str, Any], bool]:
    """Create-if-missing: (the object, True) when created, (the existing one, False) when it was there."""
    try:
        return create_object(api, kind, obj, namespace, field_manager=field_manager), True
    except ApiException as exc:
        if exc.status != 409:
            raise
    meta = obj.get("metadata") or {}
    ns = namespace or meta.get("namespace")
    existing = get_object(api, kind, ns, meta["name"])
    if existing is None:  # deleted in between: try once more
        return create_object(api, kind, obj, namespace, field_manager=field_manager), True
    return existing, False


# -- discovery --------------------------------------------------------------------------------------------

_discovery: dict[tuple[int, str], dict[str, ResourceKind]] = {}
_discovery_lock = threading.Lock()


def _discover(api: k8s.ApiClient, api_version: str) -> dict[str, ResourceKind]:
    group, _, version = api_version.rpartition("/")
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    try:
        body = request_json(api, "GET", path)
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    kinds = {}
    for res in body.get("resources") or []:
        if "/" in res.get("name", ""):  # subresources
            continue
        kinds[res["kind"]] = ResourceKind(group, version, res["name"], res["kind"], bool(res.get("namespaced")))
    return kinds


def kind_for(api: k8s.ApiClient, api_version: str, kind: str, *, refresh: bool = False) -> ResourceKind | None:
    """The ResourceKind the server serves for `apiVersion` + `kind` (by discovery, cached), or None."""
    cache_key = (id(api), api_version)
    with _discovery_lock:
        cached = None if refresh else _discovery.get(cache_key)
    if cached is None or kind not in cached:
        cached = _discover(api, api_version)
        with _discovery_lock:
            _discovery[cache_key] = cached
    return cached.get(kind)


def crd_served(api: k8s.ApiClient, crd: dict[str, Any]) -> bool:
    """Whether every served version of a CRD is in discovery and its collection answers a list."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = [v["name"] for v in spec.get("versions") or [] if v.get("served", True)]
    for version in versions:
        kind = kind_for(api, f"{spec.get('group')}/{version}", names.get("kind", ""), refresh=True)
        if kind is None or kind.plural != names.get("plural"):
            return False
        try:
            list_objects(api, kind, limit=1)
        except ApiException:
            return False
    return bool(versions)
