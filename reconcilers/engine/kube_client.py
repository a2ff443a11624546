"""The Kubernetes client (`kube`'s transport): `build_api_client` builds one from a kubeconfig (or the in-cluster
service account), and `_send` sends one request as the official client's `call_api` would (its configuration,
auth and TLS), through the client's own connection pool, without `call_api`'s cost. No Django, no telemetry here:
`kube_rest._raw` counts and traces each request around `_send`.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlencode

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from reconcilers.engine import jsonfast
from reconcilers.engine.kubeconfig import first_current_context

AUTH_SETTINGS = ["BearerToken"]
DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for ordinary requests
Timeout = float | tuple[float, float] | None


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
