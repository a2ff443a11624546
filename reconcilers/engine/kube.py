"""The Kubernetes client the engine uses, and small generic helpers over any `ResourceKind`.

`build_api_client(kubeconfig)` builds a client from a kubeconfig file (None: the in-cluster service account);
the process's shared client, configured from the settings, is `reconcilers.engine.apiclient.get_api_client()`.
This module imports no Django: the reconcile step and the benchmarks use it as it is. The helpers speak plain
REST through the client's connection pool, as `ApiClient.call_api` does (`_send`: its configuration, auth and
TLS), and hand back the JSON as dicts, so core, apps and custom resources go through the same code and the engine
never knows whether it talks to kubesim or to a real cluster. Errors are the client's `ApiException`.

Every request goes through `_raw`, the one place that counts `rest_client_requests_total{code,method,host}`
and, inside a recording span (a reconcile, a web request), opens a child span per API call; outside one
(informer watches, lease renewals) no span is started, so idle loops leave no traces.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import jsonfast, requestwatch, sampling
from reconcilers.engine.kubeconfig import first_current_context
from reconcilers.engine.metrics import REST_CLIENT_REQUESTS

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
AUTH_SETTINGS = ["BearerToken"]
DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for ordinary requests
Timeout = float | tuple[float, float] | None


# -- the client ------------------------------------------------------------------------------------------


def build_api_client(kubeconfig: str | os.PathLike[str] | None, context: str | None = None) -> k8s.ApiClient:
    """A new ApiClient from the kubeconfig file `kubeconfig` (several joined by ':' are merged, as kubectl's
    KUBECONFIG) through its `context` (None or '': its current context, as kubectl takes it: the first file's that
    sets one), or, None, from the in-cluster service account (a `context` then is a ValueError: there is nothing to
    choose from)."""
    configuration = k8s.Configuration()
    if kubeconfig:
        context = context or first_current_context(str(kubeconfig))
        k8s_config.load_kube_config(config_file=str(kubeconfig), context=context or None,
                                    client_configuration=configuration, persist_config=False)
    elif context:
        raise ValueError(f"kubeconfig context {context!r}: no kubeconfig is configured (in-cluster service account)")
    else:
        k8s_config.load_incluster_config(client_configuration=configuration)
    # One connection per informer watch plus the ordinary calls: keep them all pooled.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
    return k8s.ApiClient(configuration)


# -- paths and raw requests -----------------------------------------------------------------------------


def _group_path(kind: ResourceKind) -> str:
    return f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"


def collection_path(kind: ResourceKind, namespace: str | None = None) -> str:
    """The REST path of a collection: all namespaces when `namespace` is None (or the kind is cluster-scoped)."""
    base = _group_path(kind)
    if kind.namespaced and namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    return f"{base}/{kind.plural}"


def object_path(kind: ResourceKind, namespace: str | None, name: str, subresource: str | None = None) -> str:
    """The REST path of one object (and optionally one of its subresources)."""
    if kind.namespaced and not namespace:
        raise ValueError(f"{kind.kind} is namespaced: a namespace is required")
    path = f"{collection_path(kind, namespace if kind.namespaced else None)}/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def _query(params: dict[str, Any] | None) -> list[tuple[str, str]] | None:
    if not params:
        return None
    out = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((key, str(value)))
    return out or None


def _timeout(timeout: Timeout) -> urllib3.Timeout | None:
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout) if timeout else None


def _server_pool(api: k8s.ApiClient) -> tuple[urllib3.HTTPConnectionPool, str] | None:
    """The client's connection pool for its API server and the server URL's path prefix, found once per client
    (the pool manager's URL parsing and pool lookup were a twentieth of a worker's CPU); None behind a proxy,
    whose manager builds the proxied request itself. A client given another manager looks its pool up again."""
    manager = api.rest_client.pool_manager
    cached = getattr(api, "_opsconsole_pool", None)
    if cached is not None and cached[0] is manager:
        return cached[1], cached[2]
    if type(manager) is not urllib3.PoolManager:
        return None
    url = urllib3.util.parse_url(api.configuration.host)
    pool = manager.connection_from_host(url.host, port=url.port, scheme=url.scheme or "http")
    prefix = (url.path or "").rstrip("/")
    api._opsconsole_pool = (manager, pool, prefix)  # type: ignore[attr-defined]
    return pool, prefix


def _send(api: k8s.ApiClient, method: str, path: str, query: dict[str, Any] | None, body: Any,
          content_type: str | None, timeout: Timeout) -> Any:
    """One request as the client's `call_api` sends it, through its connection pool: its default headers and
    cookie, its auth settings (a refreshed token included), the body as JSON (anything not JSON as the client
    serializes it), the same timeouts; a 2xx answer as the unread urllib3 response, any other as `ApiException`.
    `call_api` costs a reconcile's requests a tenth of the worker's CPU on top of this, sanitizing parameters that
    are plain strings here."""
    headers = {**api.default_headers, "Accept": "application/json", "Content-Type": content_type or "application/json"}
    if api.cookie:
        headers["Cookie"] = api.cookie
    queries = _query(query) or []
    api.update_params_for_auth(headers, queries, AUTH_SETTINGS)
    uri = path + (f"?{urlencode(queries)}" if queries else "")
    if body is None or isinstance(body, (str, bytes)):
        data = body
    else:
        if headers["Content-Type"] == "application/json-patch+json" and not isinstance(body, list):
            headers["Content-Type"] = "application/strategic-merge-patch+json"  # as the client does
        data = jsonfast.dumps(body, default=api.sanitize_for_serialization)
    target = _server_pool(api)
    try:
        if target is None:
            resp = api.rest_client.pool_manager.request(method, api.configuration.host + uri, body=data,
                                                        headers=headers, preload_content=False,
                                                        timeout=_timeout(timeout))
        else:
            pool, prefix = target
            resp = pool.urlopen(method, prefix + uri, body=data, headers=headers, preload_content=False,
                                timeout=_timeout(timeout), redirect=False, assert_same_host=False)
    except urllib3.exceptions.SSLError as exc:
        raise ApiException(status=0, reason=f"{type(exc).__name__}\n{exc}") from exc
    if not 200 <= resp.status <= 299:
        error = ApiException(http_resp=resp)
        if isinstance(error.body, bytes):
            error.body = error.body.decode("utf-8")
        raise error
    return resp


def _raw(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> Any:
    parent = trace.get_current_span()
    span = (sampling.tracer("opsconsole.kube").start_span(_span_name(method, path), kind=SpanKind.CLIENT)
            if parent.is_recording() else None)
    code = "<error>"
    try:
        if span is not None:
            span.set_attributes({"http.request.method": method, "url.path": path,
                                 "server.address": _host(api)})
            with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                # the HTTP call itself carries no trace headers: kubesim and the API server do not trace
                resp = _send(api, method, path, query, body, content_type, timeout)
        else:
            resp = _send(api, method, path, query, body, content_type, timeout)
        code = str(getattr(resp, "status", "") or "<error>")
        return resp
    except ApiException as exc:
        code = str(exc.status) if exc.status else "<error>"
        raise
    finally:
        REST_CLIENT_REQUESTS.labels(code, method, _host(api)).inc()
        if span is not None:
            span.set_attribute("http.response.status_code", code)
            if not code.isdigit() or int(code) >= 400:
                span.set_status(Status(StatusCode.ERROR, code))
            span.end()


def _span_name(method: str, path: str) -> str:
    """`PUT gadgets/status`: the method and the resource (never the object's name) of a REST path."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else parts
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return f"{method} {path}"
    return f"{method} {rest[0]}/{rest[2]}" if len(rest) > 2 else f"{method} {rest[0]}"


def _host(api: k8s.ApiClient) -> str:
    """The `host` label: the API server's host:port (a bounded set: one per cluster)."""
    host = getattr(api.configuration, "host", "") or ""
    return urlsplit(host).netloc or host


def request_json(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: Timeout = DEFAULT_TIMEOUT,
) -> Any:
    """One request to any REST path; the decoded JSON answer (None when empty). Raises ApiException. Inside a
    `requestwatch.watching` block the watch may add query parameters and is told the answer."""
    watch = requestwatch.current()
    if watch is not None:
        return _watched(watch, api, method, path, query, body, content_type, timeout)
    resp = _raw(api, method, path, query=query, body=body, content_type=content_type, timeout=timeout)
    data = resp.data
    return jsonfast.loads(data) if data else None


def _watched(watch: requestwatch.RequestWatch, api: k8s.ApiClient, method: str, path: str,
             query: dict[str, Any] | None, body: Any, content_type: str | None, timeout: Timeout) -> Any:
    try:
        resp = _raw(api, method, path, query=watch.query(method, path, query), body=body, content_type=content_type,
                    timeout=timeout)
        data = resp.data
        answer = jsonfast.loads(data) if data else None
    except Exception as exc:
        watch.answered(method, path, body, None, exc)
        raise
    watch.answered(method, path, body, answer, None)
    return answer


def server_version(api: k8s.ApiClient, timeout: float = 5.0) -> dict[str, Any]:
    """GET /version (the cheapest way to know the API answers)."""
    return request_json(api, "GET", "/version", timeout=timeout)


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


# -- watch ------------------------------------------------------------------------------------------------


class WatchError(Exception):
    """The watch answered an ERROR event (a Status) other than 410."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message") or "watch error")
        self.status = status
        self.code = status.get("code")


class ResourceExpired(WatchError):
    """410 Gone: the resourceVersion is older than the server keeps. Re-list."""


@dataclass
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class WatchStream:
    """The events of one watch request; iterate it. `close()` from another thread ends the iteration."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = bytearray()
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                if self._closed:
                    return
                buffer.extend(chunk)
                while (nl := buffer.find(b"\n")) != -1:
                    line = bytes(buffer[:nl]).strip()
                    del buffer[: nl + 1]
                    if line:
                        yield self._event(line)
            if buffer.strip() and not self._closed:
                yield self._event(bytes(buffer).strip())
        except Exception:
            if self._closed:  # closing from another thread breaks the read: that is the end, not an error
                return
            raise
        finally:
            self.close()

    @staticmethod
    def _event(line: bytes) -> WatchEvent:
        data = jsonfast.loads(line)
        etype = data.get("type", "")
        obj = data.get("object") or {}
        if etype == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(obj)
            raise WatchError(obj)
        return WatchEvent(etype, obj)

    def close(self) -> None:
        """End the stream (safe from any thread, idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._response.shutdown()  # interrupts a read blocked in another thread
        except Exception:
            pass
        try:
            self._response.close()  # the connection is not reused: a watch ends rarely
        except Exception:
            pass


def watch_objects(
    api: k8s.ApiClient,
    kind: ResourceKind,
    *,
    resource_version: str,
    namespace: str | None = None,
    label_selector: str | None = None,
    timeout_seconds: int = 300,
    allow_bookmarks: bool = True,
) -> WatchStream:
    """Open a watch from `resource_version`. Raises ApiException at once (e.g. 410) when refused; the
    stream raises ResourceExpired / WatchError on ERROR events."""
    resp = _raw(
        api,
        "GET",
        collection_path(kind, namespace),
        query={
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": allow_bookmarks,
            "labelSelector": label_selector,
            "timeoutSeconds": timeout_seconds,
        },
        timeout=(5.0, timeout_seconds + 30.0),
    )
    return WatchStream(resp)


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
