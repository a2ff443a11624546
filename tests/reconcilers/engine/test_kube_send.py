"""kube_client._send: a request as the official client's `call_api` would send it, through the client's own pool."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconcilers.engine import kube, kube_client


class Response:
    def __init__(self, status: int, data: bytes = b"{}") -> None:
        self.status, self.data, self.reason = status, data, "Conflict"

    def getheaders(self):
        return {"Content-Type": "application/json"}


class Api:
    """The parts of an ApiClient `_send` uses; the pool records what it was asked."""

    def __init__(self, status: int = 200, data: bytes = b"{}") -> None:
        from kubernetes import client as k8s

        self.configuration = k8s.Configuration(host="https://k8s.example:6443")
        self.configuration.api_key = {"authorization": "Bearer tok"}
        self.default_headers = {"User-Agent": "OpenAPI-Generator/test"}
        self.cookie = None
        self.sent: list[tuple] = []
        real = k8s.ApiClient(self.configuration)
        self.update_params_for_auth = real.update_params_for_auth
        self.sanitize_for_serialization = real.sanitize_for_serialization
        outer = self

        class Pool:
            def request(self, method, url, body=None, headers=None, preload_content=True, timeout=None):
                outer.sent.append((method, url, body, headers, timeout))
                return Response(status, data)

        self.rest_client = type("Rest", (), {"pool_manager": Pool()})()


def test_headers_auth_query_and_body_are_the_client_s():
    api = Api()
    when = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
    kube_client._send(api, "PATCH", "/apis/g/v1/namespaces/a/things/x", {"fieldManager": "m", "force": True},
               {"at": when}, kube.APPLY_PATCH, (5.0, 30.0))
    method, url, body, headers, timeout = api.sent[0]
    assert method == "PATCH"
    assert url == "https://k8s.example:6443/apis/g/v1/namespaces/a/things/x?fieldManager=m&force=true"
    assert json.loads(body) == {"at": "2026-12-04T12:00:00+00:00"}  # serialized as the client does
    assert {k.lower(): v for k, v in headers.items()}["authorization"] == "Bearer tok"
    assert headers["User-Agent"] == "OpenAPI-Generator/test"
    assert headers["Content-Type"] == kube.APPLY_PATCH and headers["Accept"] == "application/json"
    assert (timeout.connect_timeout, timeout.read_timeout) == (5.0, 30.0)


def test_a_json_patch_that_is_not_a_list_goes_as_a_strategic_merge_patch_as_with_the_client():
    api = Api()
    kube_client._send(api, "PATCH", "/api/v1/x", None, {"a": 1}, "application/json-patch+json", None)
    assert api.sent[0][3]["Content-Type"] == "application/strategic-merge-patch+json"


def test_an_answer_outside_2xx_is_the_client_s_api_exception_with_its_body_decoded():
    api = Api(status=409, data=b'{"reason": "Conflict"}')
    with pytest.raises(kube.ApiException) as caught:
        kube_client._send(api, "PUT", "/api/v1/x", None, {"a": 1}, None, 5.0)
    assert caught.value.status == 409 and json.loads(caught.value.body)["reason"] == "Conflict"


# -- through a real urllib3 pool manager, to a server on this machine -----------------------------------------------


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1 that answers `{}` and records each request line's target."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            seen.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_PATCH = _answer

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], seen
    httpd.shutdown()
    httpd.server_close()


def _client(host: str, proxy: str | None = None):
    from kubernetes import client as k8s

    configuration = k8s.Configuration(host=host)
    configuration.proxy = proxy
    return k8s.ApiClient(configuration)


def test_requests_go_straight_to_the_servers_pool_with_the_hosts_path_prefix(server):
    port, seen = server
    api = _client(f"http://127.0.0.1:{port}/k8s/clusters/c-1")
    assert kube.request_json(api, "GET", "/api/v1/namespaces/a/pods", query={"limit": 5}) == {}
    kube.request_json(api, "PATCH", "/api/v1/namespaces/a/pods/p", body={"a": 1})
    assert seen == ["/k8s/clusters/c-1/api/v1/namespaces/a/pods?limit=5",
                    "/k8s/clusters/c-1/api/v1/namespaces/a/pods/p"]
    pool = api._opsconsole_pool[1]
    assert pool.host == "127.0.0.1" and pool.port == port


def test_the_pool_is_looked_up_once_per_pool_manager(server):
    import urllib3

    port, seen = server
    api = _client(f"http://127.0.0.1:{port}")
    kube.request_json(api, "GET", "/version")
    first = api._opsconsole_pool[1]
    kube.request_json(api, "GET", "/version")
    assert api._opsconsole_pool[1] is first
    api.rest_client.pool_manager = urllib3.PoolManager()  # e.g. a client rebuilt with new settings
    kube.request_json(api, "GET", "/version")
    assert api._opsconsole_pool[1] is not first and seen == ["/version"] * 3


def test_behind_a_proxy_the_proxy_manager_builds_the_request(server):
    port, seen = server
    api = _client("http://k8s.example:8080", proxy=f"http://127.0.0.1:{port}")
    assert kube.request_json(api, "GET", "/version") == {}
    assert seen == ["http://k8s.example:8080/version"]  # the absolute form a proxy is sent
    assert not hasattr(api, "_opsconsole_pool")
