"""Server-level behaviour: discovery documents, bearer-token auth, health, Status errors, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from tests.kubesim.conftest import raw


def _get(url, token=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null") if r.headers.get_content_type() == "application/json" \
                else r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_unauthenticated_and_wrong_token_requests_get_401(kubesim):
    status, body = _get(kubesim.url + "/api/v1/namespaces")
    assert status == 401 and body["reason"] == "Unauthorized" and body["kind"] == "Status"
    assert _get(kubesim.url + "/api/v1/namespaces", "wrong")[0] == 401
    assert _get(kubesim.url + "/api/v1/namespaces", kubesim.token)[0] == 200


def test_health_and_version_are_public(kubesim):
    assert _get(kubesim.url + "/healthz") == (200, "ok")
    assert _get(kubesim.url + "/readyz")[0] == 200
    status, version = _get(kubesim.url + "/version")
    assert status == 200 and version["major"] == "1" and version["gitVersion"].startswith("v1.32")


def test_discovery_lists_groups_and_resources(api_client):
    groups = client.ApisApi(api_client).get_api_versions()
    names = {g.name for g in groups.groups}
    assert {"apps", "coordination.k8s.io", "events.k8s.io", "rbac.authorization.k8s.io",
            "apiextensions.k8s.io"} <= names
    core = raw(api_client, "GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["kind"] == "Pod" and by_name["pods"]["namespaced"] is True
    assert by_name["pods"]["shortNames"] == ["po"] and "watch" in by_name["pods"]["verbs"]
    assert by_name["namespaces"]["namespaced"] is False
    assert "pods/status" in by_name and by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    apps = raw(api_client, "GET", "/apis/apps/v1")
    scale = {r["name"]: r for r in apps["resources"]}["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    assert client.CoreApi(api_client).get_api_versions().versions == ["v1"]


def test_unknown_paths_are_404_status(api_client):
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "GET", "/apis/nope.example.com/v1/things")
    assert e.value.status == 404 and json.loads(e.value.body)["reason"] == "NotFound"


def test_wrong_method_is_405(api_client, ns):
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "POST", f"/api/v1/namespaces/{ns}/configmaps/x", {})
    assert e.value.status == 405 and json.loads(e.value.body)["reason"] == "MethodNotAllowed"


def test_malformed_body_is_400(api_client, ns):
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "POST", f"/api/v1/namespaces/{ns}/configmaps", "{not json", content_type="application/json")
    assert e.value.status == 400


def test_python_m_kubesim_writes_a_kubeconfig_and_exits_cleanly_on_sigterm(tmp_path: Path):
    kubeconfig = tmp_path / "kc.yaml"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", str(kubeconfig),
                             "--token", "tok", "--log-level", "WARNING"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        # with a token it serves TLS (kubectl sends bearer tokens only over TLS), CA in the kubeconfig
        assert line.startswith("kubesim serving https://127.0.0.1:"), line
        doc = yaml.safe_load(kubeconfig.read_text())
        assert doc["users"][0]["user"]["token"] == "tok"
        assert doc["clusters"][0]["cluster"]["certificate-authority-data"]
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        assert "default" in [n.metadata.name for n in api.list_namespace().items]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
