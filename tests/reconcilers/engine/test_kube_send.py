"""kube._send: a request as the official client's `call_api` would send it, through the client's own pool."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconcilers.engine import kube


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
    kube._send(api, "PATCH", "/apis/g/v1/namespaces/a/things/x", {"fieldManager": "m", "force": True},
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
    kube._send(api, "PATCH", "/api/v1/x", None, {"a": 1}, "application/json-patch+json", None)
    assert api.sent[0][3]["Content-Type"] == "application/strategic-merge-patch+json"


def test_an_answer_outside_2xx_is_the_client_s_api_exception_with_its_body_decoded():
    api = Api(status=409, data=b'{"reason": "Conflict"}')
    with pytest.raises(kube.ApiException) as caught:
        kube._send(api, "PUT", "/api/v1/x", None, {"a": 1}, None, 5.0)
    assert caught.value.status == 409 and json.loads(caught.value.body)["reason"] == "Conflict"
