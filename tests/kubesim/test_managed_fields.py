"""metadata.managedFields on every write (create, update, patch; main resource, status and scale), as
kube-apiserver records them; kubectl's own manager names when kubectl is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.patch import managed
from kubesim.patch.strategic import merge_keys_for
from kubesim.testing import KubesimHandle, running_kubesim
from tests.kubesim.conftest import raw, widget

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
KUBECTL = "/usr/bin/kubectl"


def entries(obj: dict) -> dict[tuple[str, str, str | None], dict]:
    return {(m["manager"], m["operation"], m.get("subresource")): m
            for m in obj["metadata"].get("managedFields") or []}


def owner_of(obj: dict, *path: str) -> list[str]:
    """The managers whose fieldsV1 reaches ``path`` (fieldsV1 keys)."""
    found = []
    for m in obj["metadata"].get("managedFields") or []:
        node = m["fieldsV1"]
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            found.append(m["manager"])
    return found


def test_create_records_an_update_entry_for_the_clients_manager(core, ns):
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c", "labels": {"app": "x"}},
                                                "data": {"a": "1"}})
    raw_cm = cm.to_dict()
    (m,) = cm.metadata.managed_fields
    assert m.manager == "OpenAPI-Generator"  # the python client's User-Agent up to its first "/"
    assert (m.operation, m.api_version, m.fields_type, m.subresource) == ("Update", "v1", "FieldsV1", None)
    assert m.fields_v1 == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
    assert raw_cm["metadata"]["managed_fields"][0]["time"] is not None
    body = raw(core.api_client, "GET", f"/api/v1/namespaces/{ns}/configmaps/c")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["metadata"]["managedFields"][0]["time"])
    assert "subresource" not in body["metadata"]["managedFields"][0]


def test_ownership_moves_to_the_last_writer_of_a_field(api_client, widgets, ns):
    base = f"/apis/example.com/v1/namespaces/{ns}/widgets"
    raw(api_client, "POST", base, widget("w", size=2), query=[("fieldManager", "maker")])

    def patch(manager, body, content_type=MERGE, sub=""):
        return raw(api_client, "PATCH", f"{base}/w{sub}", body, content_type, query=[("fieldManager", manager)])

    w = patch("alice", {"spec": {"size": 3}})
    assert entries(w)[("alice", "Update", None)]["fieldsV1"] == {"f:spec": {"f:size": {}}}
    assert owner_of(w, "f:spec", "f:size") == ["alice"]
    assert owner_of(w, "f:spec", "f:mode") == ["maker"]  # defaulted at create: the creator's
    w = patch("bob", {"spec": {"size": 4}})
    assert ("alice", "Update", None) not in entries(w)  # its only field moved to bob
    assert owner_of(w, "f:spec", "f:size") == ["bob"]
    w = patch("bob", [{"op": "replace", "path": "/spec/mode", "value": "slow"}], JSON_PATCH)
    assert entries(w)[("bob", "Update", None)]["fieldsV1"] == {"f:spec": {"f:size": {}, "f:mode": {}}}
    # a status write: its own entry, keyed by subresource; the main entries keep their fields
    w = patch("opsconsole-controller", {"status": {"phase": "Ready", "replicas": 1}}, sub="/status")
    st = entries(w)[("opsconsole-controller", "Update", "status")]
    assert st["fieldsV1"] == {"f:status": {"f:phase": {}, "f:replicas": {}}} and st["subresource"] == "status"
    # a main write's status is ignored (status subresource), so nothing about status is recorded
    w = patch("mallory", {"spec": {"note": "n"}, "status": {"phase": "Gone"}})
    assert entries(w)[("mallory", "Update", None)]["fieldsV1"] == {"f:spec": {"f:note": {}}}
    # the scale subresource writes spec.replicas under its own entry
    raw(api_client, "PATCH", f"{base}/w/scale", {"spec": {"replicas": 5}}, MERGE, query=[("fieldManager", "hpa")])
    w = raw(api_client, "GET", f"{base}/w")
    assert entries(w)[("hpa", "Update", "scale")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert owner_of(w, "f:spec", "f:replicas") == ["hpa"]


def test_annotations_by_a_third_manager_and_removal(api_client, core, ns):
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    raw(api_client, "PATCH", path, {"metadata": {"annotations": {"opsconsole.io/x": "1"}}}, MERGE,
        query=[("fieldManager", "alice")])
    raw(api_client, "PATCH", path, {"data": {"a": "2"}}, STRATEGIC, query=[("fieldManager", "bob")])
    cm = raw(api_client, "PATCH", path, {"metadata": {"annotations": {"opsconsole.io/x": "2", "y": "1"}}},
             STRATEGIC, query=[("fieldManager", "carol")])
    assert entries(cm)[("carol", "Update", None)]["fieldsV1"] == {
        "f:metadata": {"f:annotations": {"f:opsconsole.io/x": {}, "f:y": {}}}}
    assert set(entries(cm)) == {("bob", "Update", None), ("carol", "Update", None)}  # alice and the creator lost all
    # a removed field belongs to nobody (as in structured-merge-diff), the writer included
    cm = raw(api_client, "PATCH", path, {"metadata": {"annotations": {"y": None}}}, MERGE,
             query=[("fieldManager", "dave")])
    assert ("dave", "Update", None) not in entries(cm)
    assert entries(cm)[("carol", "Update", None)]["fieldsV1"] == {
        "f:metadata": {"f:annotations": {"f:opsconsole.io/x": {}}}}


def test_no_op_writes_and_clearing(api_client, core, ns):
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    before = raw(api_client, "PATCH", path, {"data": {"b": "2"}}, MERGE, query=[("fieldManager", "alice")])
    same = raw(api_client, "PATCH", path, {"data": {"b": "2"}}, MERGE, query=[("fieldManager", "bob")])
    assert same["metadata"] == before["metadata"]
    put = raw(api_client, "PUT", path, before, query=[("fieldManager", "carol")])
    assert put["metadata"] == before["metadata"]
    # other managedFields in a body are ignored: the server computes them
    forged = dict(before, metadata={**before["metadata"], "managedFields": [
        {"manager": "forger", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]})
    assert raw(api_client, "PUT", path, forged)["metadata"] == before["metadata"]
    # [{}] clears them (a write of its own), then the write's changes are recorded
    cleared = raw(api_client, "PATCH", path, {"metadata": {"managedFields": [{}]}}, MERGE)
    assert "managedFields" not in cleared["metadata"]
    assert cleared["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    cm = raw(api_client, "PATCH", path, {"metadata": {"managedFields": [{}]}, "data": {"c": "3"}}, MERGE,
             query=[("fieldManager", "erin")])
    assert [m["manager"] for m in cm["metadata"]["managedFields"]] == ["erin"]
    cm = raw(api_client, "PATCH", path, [{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}],
             JSON_PATCH)
    assert "managedFields" not in cm["metadata"]


def test_status_conditions_are_owned_by_key(api_client, core, ns):
    core.create_namespaced_service(ns, {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    path = f"/api/v1/namespaces/{ns}/services/s/status"
    cond = {"type": "Ready", "status": "True", "reason": "R", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    raw(api_client, "PATCH", path, {"status": {"conditions": [cond]}}, STRATEGIC, query=[("fieldManager", "a")])
    svc = raw(api_client, "PATCH", path, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
              STRATEGIC, query=[("fieldManager", "b")])
    ready = 'k:{"type":"Ready"}'
    assert entries(svc)[("b", "Update", "status")]["fieldsV1"] == {"f:status": {"f:conditions": {ready: {
        "f:status": {}}}}}
    assert "f:status" not in entries(svc)[("a", "Update", "status")]["fieldsV1"]["f:status"]["f:conditions"][ready]
    assert entries(svc)[("OpenAPI-Generator", "Update", None)]["fieldsV1"]["f:spec"]["f:ports"] == {
        'k:{"port":80}': {"f:port": {}, "f:protocol": {}, "f:targetPort": {}}}


def test_diff_keys_lists_and_sets():
    keys = managed.builtin_list_keys("apps", "deployments")
    assert keys[("metadata", "finalizers")] == () and merge_keys_for("apps", "deployments")
    old = {"metadata": {"finalizers": ["a"]}, "spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "x:1"}, {"name": "side", "image": "y:1"}]}}}}
    new = {"metadata": {"finalizers": ["a", "b"]}, "spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "x:2"}]}}}}
    changed, removed = managed.diff(old, new, keys)
    containers = ("f:spec", "f:template", "f:spec", "f:containers")
    assert changed == {("f:metadata", "f:finalizers", 'v:"b"'), containers + ('k:{"name":"app"}', "f:image")}
    assert removed == {containers + ('k:{"name":"side"}',)}
    crd_keys = managed.schema_list_keys({"properties": {"status": {"properties": {"conditions": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}}}}})
    assert crd_keys[("status", "conditions")] == ("type",)


def test_server_side_apply_and_updates_share_fields(api_client, widgets, ns):
    path = f"/apis/example.com/v1/namespaces/{ns}/widgets/sa"
    body = widget("sa", size=2, name="abc")
    w = raw(api_client, "PATCH", path, body, APPLY, query=[("fieldManager", "applier")])
    assert set(entries(w)) == {("applier", "Apply", None)}  # a create by apply records only the Apply entry
    w = raw(api_client, "PATCH", path, {"spec": {"size": 5}}, MERGE, query=[("fieldManager", "kubectl-patch")])
    assert owner_of(w, "f:spec", "f:size") == ["kubectl-patch"]  # an Update takes the field (force, as kube)
    assert owner_of(w, "f:spec", "f:name") == ["applier"]
    w = raw(api_client, "PATCH", path, body, APPLY, query=[("fieldManager", "applier"), ("force", "true")])
    assert w["spec"]["size"] == 2 and owner_of(w, "f:spec", "f:size") == ["applier"]
    assert [m["operation"] for m in w["metadata"]["managedFields"]] == ["Apply"]


@pytest.fixture(scope="module")
def tls_kubesim() -> Iterator[KubesimHandle]:
    with running_kubesim(tls=True, controllers=False) as k:
        yield k


@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl is not installed at /usr/bin/kubectl")
def test_kubectl_manager_names(tls_kubesim, tmp_path):
    env = dict(os.environ, KUBECONFIG=tls_kubesim.kubeconfig, HOME=str(tmp_path),
               KUBE_EDITOR="sed -i -e 's/^  a: \"1\"$/  a: \"9\"/'")

    def kubectl(*args: str, stdin: str | None = None) -> str:
        proc = subprocess.run([shutil.which(KUBECTL) or KUBECTL, "--cache-dir", str(tmp_path / "cache"), *args],
                              input=stdin, env=env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: default}\ndata: {a: '1'}\n"
    kubectl("apply", "-f", "-", stdin=cm)
    kubectl("annotate", "configmap", "c1", "opsconsole.io/x=1")
    kubectl("patch", "configmap", "c1", "-p", '{"data":{"b":"2"}}')
    kubectl("edit", "configmap", "c1")
    obj = json.loads(kubectl("get", "configmap", "c1", "-o", "json", "--show-managed-fields"))
    assert obj["data"] == {"a": "9", "b": "2"}
    assert owner_of(obj, "f:metadata", "f:annotations", "f:opsconsole.io/x") == ["kubectl-annotate"]
    assert owner_of(obj, "f:data", "f:b") == ["kubectl-patch"]
    assert owner_of(obj, "f:data", "f:a") == ["kubectl-edit"]
    assert owner_of(obj, "f:metadata", "f:annotations", "f:kubectl.kubernetes.io/last-applied-configuration") == [
        "kubectl-client-side-apply"]


# -- issue 37: the field managers kube-apiserver refuses (ValidateFieldManager) ------------------------------------

LONG_MANAGER = "opsconsole-controller" + "x" * (129 - len("opsconsole-controller"))


def refused(call) -> dict:
    with pytest.raises(client.ApiException) as caught:
        call()
    assert caught.value.status == 422, caught.value.body
    return json.loads(caught.value.body)


def test_a_field_manager_of_129_bytes_is_refused_on_patch_create_and_update(core, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    body = refused(lambda: core.patch_namespaced_config_map("c", ns, {"data": {"a": "2"}},
                                                            field_manager=LONG_MANAGER))
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "PatchOptions"
    assert body["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: must have at most '
                               "128 bytes")
    assert body["details"]["causes"] == [{"reason": "FieldValueTooLong", "field": "fieldManager",
                                          "message": "Too long: must have at most 128 bytes"}]
    body = refused(lambda: core.create_namespaced_config_map(ns, {"metadata": {"name": "d"}},
                                                             field_manager=LONG_MANAGER))
    assert body["message"].startswith('CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long')
    body = refused(lambda: core.replace_namespaced_config_map("c", ns, {"metadata": {"name": "c"}, "data": {}},
                                                              field_manager=LONG_MANAGER))
    assert body["message"].startswith('UpdateOptions.meta.k8s.io "" is invalid: fieldManager: Too long')
    cm = core.read_namespaced_config_map("c", ns)
    assert cm.data == {"a": "1"} and [m.manager for m in cm.metadata.managed_fields] == ["OpenAPI-Generator"]
    with pytest.raises(client.ApiException):
        core.read_namespaced_config_map("d", ns)
    ok = core.patch_namespaced_config_map("c", ns, {"data": {"a": "3"}}, field_manager=LONG_MANAGER[:128])
    assert LONG_MANAGER[:128] in [m.manager for m in ok.metadata.managed_fields]


def test_a_field_manager_with_a_newline_is_refused_naming_the_character(api_client, core, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"a": "1"}})
    body = refused(lambda: core.patch_namespaced_config_map("c", ns, {"data": {"a": "2"}},
                                                            field_manager="opsconsole-controller\nkubectl"))
    assert body["message"] == ('PatchOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: '
                               '"opsconsole-controller\\nkubectl": invalid character U+000A (at position 21)')
    with pytest.raises(client.ApiException) as caught:  # server-side apply too, and a tab, bytes counted as Go does
        raw(api_client, "PATCH", f"/api/v1/namespaces/{ns}/configmaps/c",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, APPLY,
            query=[("fieldManager", "é\tx")])
    assert caught.value.status == 422
    assert "invalid character U+0009 (at position 2)" in json.loads(caught.value.body)["message"]
    assert core.read_namespaced_config_map("c", ns).data == {"a": "1"}


@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl is not installed at /usr/bin/kubectl")
def test_kubectl_with_a_long_or_multiline_field_manager_is_refused(tls_kubesim, tmp_path):
    env = dict(os.environ, KUBECONFIG=tls_kubesim.kubeconfig, HOME=str(tmp_path))

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([shutil.which(KUBECTL) or KUBECTL, "--cache-dir", str(tmp_path / "cache"), *args],
                              env=env, capture_output=True, text=True, timeout=30)

    assert kubectl("create", "configmap", "fm", "--from-literal=a=1").returncode == 0
    long = kubectl("patch", "configmap", "fm", "-p", '{"data":{"a":"2"}}', f"--field-manager={LONG_MANAGER}")
    assert long.returncode != 0
    assert 'The PatchOptions "" is invalid: fieldManager: Too long: must have at most 128 bytes' in long.stderr
    newline = kubectl("annotate", "configmap", "fm", "x=1", "--field-manager=opsconsole-controller\nx")
    assert newline.returncode != 0 and "invalid character U+000A (at position 21)" in newline.stderr
    got = json.loads(kubectl("get", "configmap", "fm", "-o", "json").stdout)
    assert got["data"] == {"a": "1"} and "annotations" not in got["metadata"]
