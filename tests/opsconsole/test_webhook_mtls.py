"""The webhook port as an attacker who reaches it sees it: a made-up AdmissionReview POSTed without a client
certificate (or with one from another CA) is refused in the TLS handshake and never recorded; `runwebhooks` as
`make run` and compose start it requires the certificate by default and refuses to start without a client CA; a
decision the API server asked for carries its address and its certificate's CN; malformed reviews answer 400 with
a reason; admitted writes are noted, signed, for the engine."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from django.conf import settings

from kubesim.testing import wait_for
from opsconsole.webhooks.server import WebhookServer, tls_context
from opsconsole.webhooks.tls import CLIENT_CN, ensure_certificates, ensure_client_certificates
from reconcilers.engine.admitted import admitted_find, signing_key
from reconcilers.models import ActionRecord
from tests.support import workers
from tests.support.webhooks_mtls import Mtls, mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
PATH = "/validate/cache.example.com/memcacheds"


def forged_review(name: str = "cache-team-b", operation: str = "DELETE", **request: Any) -> dict[str, Any]:
    """The attack's review: a DELETE by a `system:masters` user that does not exist."""
    body = {"uid": str(uuid.uuid4()), "operation": operation, "namespace": "team-b", "name": name,
            "kind": {"group": "cache.example.com", "version": "v1alpha1", "kind": "Memcached"},
            "userInfo": {"username": "mallory", "groups": ["system:masters"]},
            "oldObject": {"metadata": {"name": name, "namespace": "team-b", "uid": "u-1"}, "spec": {"size": 1}},
            **request}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


def post(url: str, body: bytes | dict[str, Any], context: ssl.SSLContext) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def recorded(uid: str) -> list[ActionRecord]:
    return list(ActionRecord.objects.filter(action__startswith="admission.", detail__uid=uid))


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Any:
    server, files = mtls_server(tmp_path_factory.mktemp("mtls"))
    yield server, files
    server.stop()


def test_a_direct_post_without_a_client_certificate_is_refused_in_the_handshake_and_never_recorded(served):
    server, files = served
    review = forged_review()
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        post(server.url() + PATH, review, files.client_context(with_certificate=False))
    other = Mtls(files.serving, ensure_client_certificates(Path(tempfile.mkdtemp(prefix="other-ca-"))))
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):  # a certificate from another CA
        post(server.url() + PATH, review, other.client_context())
    status, answer = post(server.url() + PATH, forged_review(name="real"), files.client_context())
    assert status == 200 and answer["response"]["allowed"] is True  # the API server's certificate is served
    assert recorded(review["request"]["uid"]) == []


def test_a_decision_carries_the_callers_address_and_client_certificate(served):
    server, files = served
    review = forged_review(operation="UPDATE", object={"metadata": {"name": "c", "namespace": "team-b"},
                                                       "spec": {"size": 2}})
    status, _ = post(server.url() + PATH, review, files.client_context())
    assert status == 200
    (record,) = wait_for(lambda: recorded(review["request"]["uid"]), timeout=15)
    assert record.remote_addr == "127.0.0.1"
    assert record.detail["peer"] == {"address": "127.0.0.1", "cn": CLIENT_CN}


def test_an_admitted_write_is_noted_signed_for_the_engine_and_a_dry_run_or_refusal_is_not(served):
    server, files = served
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    key = signing_key(settings.SECRET_KEY)
    name = f"noted-{uuid.uuid4().hex[:6]}"
    obj = {"metadata": {"name": name, "namespace": "team-b", "uid": "obj-1"}, "spec": {"size": 2},
           "status": {"phase": "Degraded"}}
    post(server.url() + PATH, forged_review(name=name, operation="UPDATE", subResource="status", object=obj,
                                            dryRun=True), files.client_context())
    post(server.url() + PATH, forged_review(name=name, operation="UPDATE", object={**obj, "spec": {"size": "lots"}}),
         files.client_context())  # refused by the spec model
    assert admitted_find(client, key, "cache.example.com", "Memcached", "team-b", name, match=lambda e: True) is None
    status, answer = post(server.url() + PATH, forged_review(name=name, operation="UPDATE", subResource="status",
                                                             object=obj), files.client_context())
    assert status == 200 and answer["response"]["allowed"] is True
    entry = admitted_find(client, key, "cache.example.com", "Memcached", "team-b", name, match=lambda e: True)
    assert entry is not None and entry["subresource"] == "status" and entry["phase"] == "Degraded"
    assert entry["user"]["username"] == "mallory" and entry["peer"] == {"address": "127.0.0.1", "cn": CLIENT_CN}


MALFORMED = [
    (b"this is not JSON", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'"a string"', "JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, "deep"),
    (b'{"request": {"uid": "x", "object": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "deep"),
    (json.dumps({"request": {"uid": "x", "operation": "CREATE", "object": []}}).encode(), "request.object"),
    (json.dumps({"request": {"uid": "x", "operation": "CREATE", "object": {"metadata": "m"}}}).encode(),
     "metadata"),
    (json.dumps({"request": {"uid": "x", "operation": "CREATE", "userInfo": "root"}}).encode(), "userInfo"),
    (json.dumps({"request": {"uid": "x", "operation": "CREATE", "userInfo": {"groups": "g"}}}).encode(), "groups"),
    (json.dumps({"request": {"uid": "x", "operation": "DELETE", "oldObject": 7}}).encode(), "oldObject"),
    (json.dumps({"request": {"uid": 5}}).encode(), "uid"),
    (json.dumps({"request": []}).encode(), "request"),
]


@pytest.mark.parametrize(("body", "reason"), MALFORMED, ids=[r for _, r in MALFORMED])
def test_a_malformed_review_answers_400_with_a_reason(served, body, reason):
    server, files = served
    for path in (PATH, "/mutate/cache.example.com/memcacheds"):
        status, answer = post(server.url() + path, body, files.client_context())
        assert status == 400 and reason in answer["error"], (path, answer)
    status, _ = post(server.url() + PATH, forged_review(name="after"), files.client_context())
    assert status == 200  # the server is fine


def test_a_server_without_a_client_ca_refuses_to_start_unless_told_it_is_insecure(tmp_path):
    files = ensure_certificates(tmp_path, ("localhost",))
    with pytest.raises(ValueError, match="client certificates"):
        WebhookServer(tls_context(str(files.cert), str(files.key)))
    assert WebhookServer(tls_context(str(files.cert), str(files.key)), insecure=True).context is not None


def test_runwebhooks_by_default_refuses_a_direct_post_without_the_api_servers_certificate(tmp_path):
    """The attack on the command as `make run` and compose start it (generated certificates, no flags)."""
    env = {**os.environ, "DATABASE_URL": workers.test_database_url(), "OPSCONSOLE_DATA_DIR": str(tmp_path),
           "OPSCONSOLE_TRACING": "off"}
    proc = subprocess.Popen([sys.executable, "manage.py", "runwebhooks", "--port", "0", "--metrics-port", "0"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        for _ in range(200):  # bounded: the lines it prints before it serves
            line = proc.stdout.readline()
            if not line:
                break
            if "serving admission webhooks on https://" in line:
                port = int(line.split("https://", 1)[1].split()[0].rsplit(":", 1)[1])
                break
        assert port, "runwebhooks did not start"
        serving = ensure_certificates(tmp_path / "webhooks")
        context = ssl.create_default_context(cadata=serving.ca_pem().decode())
        review = forged_review()
        with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
            post(f"https://localhost:{port}{PATH}", review, context)
        client = ensure_client_certificates(tmp_path / "webhooks")  # the one it made for the API server
        context.load_cert_chain(str(client.cert), str(client.key))
        assert post(f"https://localhost:{port}{PATH}", forged_review(name="by-the-api-server"), context)[0] == 200
        assert recorded(review["request"]["uid"]) == []
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_metrics_port_needs_no_client_certificate_and_the_tls_port_serves_no_one_else(served):
    server, files = served
    with urllib.request.urlopen(server.metrics_url() + "/healthz", timeout=10) as resp:
        assert resp.read() == b"ok"
    with urllib.request.urlopen(server.metrics_url() + "/metrics", timeout=10) as resp:
        page = resp.read().decode()
    assert 'opsconsole_thread_restarts_total{thread="admission-recorder"}' in page
    with socket.create_connection(("127.0.0.1", server.metrics_port), timeout=5) as raw:  # no reviews there
        raw.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        assert raw.recv(100).split(b" ")[1] in (b"404", b"405", b"413")
