"""REST requests to an API server (`kube`'s requests): the paths of a kind's collection and objects, and
`request_json`, one request to any path answered as decoded JSON. Every request goes through `_raw`, the one place
that counts `rest_client_requests_total{code,method,host}` and, inside a recording span (a reconcile, a web
request), opens a child span per API call; outside one (informer watches, lease renewals) no span is started, so
idle loops leave no traces. Inside a `requestwatch.watching` block the watch sees each request and its answer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import jsonfast, requestwatch, sampling
from reconcilers.engine.kube_client import DEFAULT_TIMEOUT, Timeout, _send
from reconcilers.engine.metrics import REST_CLIENT_REQUESTS


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
                                 "server.address": api_host(api)})
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
        REST_CLIENT_REQUESTS.labels(code, method, api_host(api)).inc()
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


def api_host(api: k8s.ApiClient) -> str:
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
