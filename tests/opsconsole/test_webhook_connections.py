"""Connections to the webhook port are bounded: 1,000 idle connections (and half-sent requests) never hold more
than the limit, are evicted or closed, and the API server's review is still answered; a body over the limit is a
413. Only against 127.0.0.1, in bounded loops."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from bench.webhooks.idle_connections import still_open
from kubesim.testing import wait_for
from opsconsole.webhooks.app import MAX_BODY
from opsconsole.webhooks.connections import Limits
from tests.support.webhooks_mtls import mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PATH = "/validate/cache.example.com/memcacheds"
LIMIT = 50
IDLE = 1000


@pytest.fixture
def bounded(tmp_path) -> Any:
    limits = Limits(max_connections=LIMIT, handshake_timeout=2.0, header_timeout=2.0, read_timeout=2.0,
                    keepalive_timeout=2.0)
    server, files = mtls_server(tmp_path, limits=limits)
    yield server, files
    server.stop()


def review() -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "n", "name": "x",
        "userInfo": {"username": "alice"}, "object": {"metadata": {"name": "x"}, "spec": {"size": 1}}}}).encode()


def answers_a_review(server: Any, files: Any) -> bool:
    request = urllib.request.Request(server.url() + PATH, data=review(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=files.client_context(), timeout=10) as resp:
            return resp.status == 200 and json.loads(resp.read())["response"]["allowed"] is True
    except (OSError, urllib.error.URLError):
        return False


def events(server: Any, event: str) -> float:
    return server.metrics.connection_events.labels(event)._value.get()


def test_a_thousand_idle_connections_are_evicted_and_the_api_server_is_still_answered(bounded):
    server, files = bounded
    sockets: list[socket.socket] = []
    try:
        for _ in range(IDLE):  # connect and say nothing: not even a TLS ClientHello
            sockets.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        wait_for(lambda: still_open(sockets) <= LIMIT, timeout=30)
        assert server.gate.count() <= LIMIT
        assert events(server, "evicted") + events(server, "refused") >= IDLE - LIMIT
        assert wait_for(lambda: answers_a_review(server, files), timeout=30)  # its connection evicts an idle one
        wait_for(lambda: still_open(sockets) == 0, timeout=30)  # the rest: closed at their handshake deadline
    finally:
        for s in sockets:
            s.close()
    assert answers_a_review(server, files)


def test_half_sent_requests_are_closed_and_never_hold_more_than_the_limit(bounded):
    server, files = bounded
    context = files.client_context()
    sockets: list[ssl.SSLSocket] = []
    try:
        for i in range(2 * LIMIT):  # past the handshake with the API server's certificate, then a head half sent
            raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            try:
                tls = context.wrap_socket(raw, server_hostname="localhost")
            except OSError:
                raw.close()
                continue
            if i % 2:
                tls.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: localhost\r\n")  # no end of head
            else:
                tls.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5000\r\n"
                            b"Content-Type: application/json\r\n\r\n{\"request\": ")  # a body half sent
            sockets.append(tls)
        assert server.gate.count() <= LIMIT
        wait_for(lambda: server.gate.count() == 0, timeout=30)  # every one closed at its deadline
        assert events(server, "timeout_head") + events(server, "timeout_body") + events(server, "evicted") >= LIMIT
    finally:
        for s in sockets:
            s.close()
    assert answers_a_review(server, files)


def test_a_body_over_the_limit_is_a_413(bounded):
    server, files = bounded
    request = urllib.request.Request(server.url() + PATH, data=b" " * (MAX_BODY + 1), method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, context=files.client_context(), timeout=30)
    assert info.value.code == 413
