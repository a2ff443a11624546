"""--data-dir persistence across restarts, fault injection, Table output and server-side apply."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from kubernetes import client, watch

from kubesim.testing import running_kubesim
from tests.kubesim.conftest import WIDGET_CRD, raw, widget

W = ("example.com", "v1")
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io"


def test_objects_crds_and_the_counter_survive_a_restart(tmp_path):
    with running_kubesim(data_dir=str(tmp_path), controllers=False) as k:
        api = k.api_client()
        core = client.CoreV1Api(api)
        client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGET_CRD)
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(*W, "default", "widgets", widget("kept", size=4))
        cm = core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        core.create_namespaced_config_map("default", {"metadata": {"name": "gone"}})
        core.delete_namespaced_config_map("gone", "default")
        rv_before = int(core.list_namespaced_config_map("default").metadata.resource_version)
        k.restart()
        api = k.api_client()
        core = client.CoreV1Api(api)
        again = core.read_namespaced_config_map("kept", "default")
        assert again.data == {"a": "1"} and again.metadata.uid == cm.metadata.uid
        assert again.metadata.resource_version == cm.metadata.resource_version
        names = [c.metadata.name for c in core.list_namespaced_config_map("default").items]
        assert "gone" not in names
        w = client.CustomObjectsApi(api).get_namespaced_custom_object(*W, "default", "widgets", "kept")
        assert w["spec"]["size"] == 4
        new = core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})
        assert int(new.metadata.resource_version) > rv_before
    assert (tmp_path / "snapshot.json").exists()


def test_a_killed_process_keeps_what_was_journalled(tmp_path):
    with running_kubesim(data_dir=str(tmp_path), mode="process", controllers=False) as k:
        core = client.CoreV1Api(k.api_client())
        core.create_namespaced_config_map("default", {"metadata": {"name": "j"}, "data": {"x": "y"}})
        k._server.proc.kill()  # no clean shutdown, no final snapshot
        k._server.proc.wait()
        k.start()
        assert client.CoreV1Api(k.api_client()).read_namespaced_config_map("j", "default").data == {"x": "y"}


def test_injected_429_carry_retry_after_and_500s_a_status():
    with running_kubesim(controllers=False) as k:
        api = k.api_client()
        core = client.CoreV1Api(api)
        k.set_faults(error_rate=1.0, error_code=429, retry_after=7)
        # plain urllib: the kubernetes client's urllib3 would itself honour Retry-After and retry
        req = urllib.request.Request(k.url + "/api/v1/namespaces/default/configmaps",
                                     headers={"Authorization": f"Bearer {k.token}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 429 and e.value.headers["Retry-After"] == "7"
        body = json.loads(e.value.read())
        assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 7
        k.set_faults(error_code=500)
        with pytest.raises(client.ApiException) as e:
            core.list_namespaced_config_map("default")
        assert e.value.status == 500 and json.loads(e.value.body)["reason"] == "InternalError"
        assert core.get_api_resources().group_version == "v1"  # discovery is never faulted
        k.set_faults(error_rate=0.5)
        codes = []
        for _ in range(60):
            try:
                core.list_namespaced_config_map("default")
                codes.append(200)
            except client.ApiException as ex:
                codes.append(ex.status)
        assert 10 < codes.count(500) < 50 and codes.count(200) > 10
        k.clear_faults()
        assert core.list_namespaced_config_map("default").items is not None
        assert k.stats()["injectedErrors"] >= 11


def test_added_latency_and_method_filter():
    with running_kubesim(controllers=False, latency=0.2, methods=["POST"]) as k:
        core = client.CoreV1Api(k.api_client())
        t0 = time.monotonic()
        core.list_namespaced_config_map("default")
        assert time.monotonic() - t0 < 0.2
        t0 = time.monotonic()
        core.create_namespaced_config_map("default", {"metadata": {"name": "slow"}})
        assert time.monotonic() - t0 >= 0.2


def test_watch_streams_are_cut_after_n_events():
    with running_kubesim(controllers=False, watch_cut_after=2) as k:
        core = client.CoreV1Api(k.api_client())
        for i in range(5):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        resp = core.list_namespaced_config_map("default", watch=True, timeout_seconds=5, _preload_content=False)
        t0 = time.monotonic()
        lines = [line for line in resp.data.decode().splitlines() if line]
        assert len(lines) == 2 and time.monotonic() - t0 < 2
        # the client resumes from the last resourceVersion it saw and misses nothing
        w = watch.Watch()
        seen = []
        for ev in w.stream(core.list_namespaced_config_map, "default", resource_version="1"):
            seen.append(ev["object"].metadata.name)
            if len(seen) == 5:
                w.stop()
        assert seen == [f"c{i}" for i in range(5)]


def test_table_output_uses_additional_printer_columns(api_client, custom, widgets, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", widget("t", size=7))
    custom.patch_namespaced_custom_object_status(*W, ns, "widgets", "t", {"status": {"phase": "Ready"}})
    table = raw(api_client, "GET", f"/apis/example.com/v1/namespaces/{ns}/widgets", accept=TABLE)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Phase", "Age"]
    row = table["rows"][0]
    assert row["cells"][:3] == ["t", 7, "Ready"] and row["cells"][3].endswith("s")
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "t"
    one = raw(api_client, "GET", f"/apis/example.com/v1/namespaces/{ns}/widgets/t", accept=TABLE,
              query=[("includeObject", "Object")])
    assert one["rows"][0]["object"]["spec"]["size"] == 7


def test_builtin_table_for_pods(api_client, core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "x:1"}]}})
    table = raw(api_client, "GET", f"/api/v1/namespaces/{ns}/pods", accept=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:2] == ["p", "0/1"]


def test_server_side_apply_creates_then_updates(api_client, ns):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}}
    path = f"/api/v1/namespaces/{ns}/configmaps/ssa"
    created = raw(api_client, "PATCH", path, body, "application/apply-patch+yaml",
                  query=[("fieldManager", "tester")])
    assert created["data"] == {"a": "1"}
    assert created["metadata"]["managedFields"][0]["manager"] == "tester"
    body["data"] = {"a": "2", "b": "3"}
    updated = raw(api_client, "PATCH", path, body, "application/apply-patch+yaml",
                  query=[("fieldManager", "tester"), ("force", "true")])
    assert updated["data"] == {"a": "2", "b": "3"}
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "PATCH", path, body, "application/apply-patch+yaml")
    assert e.value.status == 422  # fieldManager is required


def test_list_with_a_resource_version_ahead_of_the_server_is_504(core, ns):
    with pytest.raises(client.ApiException) as e:
        core.list_namespaced_config_map(ns, resource_version="999999999")
    assert e.value.status == 504


def test_server_side_apply_removes_fields_a_manager_stops_applying(api_client, widgets, ns):
    path = f"/apis/example.com/v1/namespaces/{ns}/widgets/sa"

    def apply(manager, spec, labels=None):
        body = {"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "sa", **({"labels": labels} if labels else {})}, "spec": spec}
        return raw(api_client, "PATCH", path, body, "application/apply-patch+yaml",
                   query=[("fieldManager", manager), ("force", "true")])

    apply("alice", {"size": 2, "name": "abc", "extra": {"x": 1}}, {"team": "a", "tier": "web"})
    apply("bob", {"size": 2, "tags": ["t"]})
    w = apply("alice", {"size": 3}, {"team": "a"})
    assert "name" not in w["spec"] and "extra" not in w["spec"]  # alice let go of them
    assert w["spec"]["tags"] == ["t"]  # bob still applies tags
    assert w["spec"]["size"] == 3 and w["metadata"]["labels"] == {"team": "a"}
    managers = {m["manager"]: m for m in w["metadata"]["managedFields"]}
    assert managers["alice"]["fieldsV1"]["f:spec"] == {"f:size": {}}
    w = apply("bob", {"size": 3})
    assert "tags" not in w["spec"]
