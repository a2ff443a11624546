"""CRUD semantics over HTTP: uid/resourceVersion/generation, 409 on stale writes, status isolation, patches."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.kubesim.conftest import raw, widget

W = ("example.com", "v1")


def _status(e: client.ApiException) -> dict:
    return json.loads(e.body)


def test_create_sets_server_fields_and_resource_versions_increase(core, ns):
    a = core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    b = core.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
    assert a.metadata.uid and a.metadata.uid != b.metadata.uid
    assert a.metadata.creation_timestamp is not None
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)
    assert core.read_namespaced_config_map("a", ns).data == {"k": "v"}


def test_generate_name_gives_a_unique_name(core, ns):
    names = {core.create_namespaced_config_map(ns, {"metadata": {"generateName": "gen-"}}).metadata.name
             for _ in range(3)}
    assert len(names) == 3 and all(n.startswith("gen-") and len(n) == 9 for n in names)


def test_duplicate_create_is_409_already_exists(core, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    assert e.value.status == 409
    body = _status(e.value)
    assert body["reason"] == "AlreadyExists" and body["kind"] == "Status"
    assert body["details"] == {"name": "dup", "kind": "configmaps"}


def test_missing_object_is_404_not_found_status(core, ns):
    with pytest.raises(client.ApiException) as e:
        core.read_namespaced_config_map("nope", ns)
    assert e.value.status == 404
    assert _status(e.value)["message"] == 'configmaps "nope" not found'


def test_create_in_a_missing_namespace_is_404(core):
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "x"}})
    assert e.value.status == 404
    assert _status(e.value)["details"]["kind"] == "namespaces"


def test_invalid_name_is_422_naming_the_field(core, ns):
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}})
    assert e.value.status == 422
    assert _status(e.value)["details"]["causes"][0]["field"] == "metadata.name"


def test_put_with_a_stale_resource_version_is_409_conflict(core, ns):
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}, "data": {"n": "1"}})
    fresh = core.patch_namespaced_config_map("c", ns, {"data": {"n": "2"}})
    assert int(fresh.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"n": "3"}
    with pytest.raises(client.ApiException) as e:
        core.replace_namespaced_config_map("c", ns, cm)
    assert e.value.status == 409 and _status(e.value)["reason"] == "Conflict"
    fresh.data = {"n": "3"}
    assert core.replace_namespaced_config_map("c", ns, fresh).data == {"n": "3"}


def test_patch_carrying_a_stale_resource_version_is_409(core, ns):
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "p"}})
    core.patch_namespaced_config_map("p", ns, {"data": {"a": "1"}})
    with pytest.raises(client.ApiException) as e:
        core.patch_namespaced_config_map("p", ns, {"metadata": {"resourceVersion": cm.metadata.resource_version},
                                                   "data": {"a": "2"}})
    assert e.value.status == 409


def test_a_no_op_update_keeps_the_resource_version(core, ns):
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "same"}, "data": {"a": "1"}})
    again = core.patch_namespaced_config_map("same", ns, {"data": {"a": "1"}})
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_json_patch_and_merge_patch(core, api_client, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "j", "labels": {"x": "1"}}, "data": {"a": "1"}})
    patched = core.patch_namespaced_config_map("j", ns, [
        {"op": "add", "path": "/data/b", "value": "2"},
        {"op": "remove", "path": "/data/a"},
        {"op": "replace", "path": "/metadata/labels/x", "value": "9"},
    ])
    assert patched.data == {"b": "2"} and patched.metadata.labels == {"x": "9"}
    with pytest.raises(client.ApiException) as e:
        core.patch_namespaced_config_map("j", ns, [{"op": "test", "path": "/data/b", "value": "nope"}])
    assert e.value.status == 422
    # merge patch: null removes a key
    resp = raw(api_client, "PATCH", f"/api/v1/namespaces/{ns}/configmaps/j", {"data": {"b": None, "c": "3"}},
               "application/merge-patch+json")
    assert resp["data"] == {"c": "3"}


def test_strategic_merge_patch_merges_containers_by_name(apps, ns):
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                                    {"name": "side", "image": "side:1"}]}}}})
    d = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]}}}})
    containers = {c.name: c for c in d.spec.template.spec.containers}
    assert set(containers) == {"app", "side"}
    assert containers["app"].image == "app:2"
    assert [e.name for e in containers["app"].env] == ["A", "B"]
    d = apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "$patch": "delete"}]}}}})
    assert [c.name for c in d.spec.template.spec.containers] == ["app"]


def test_strategic_merge_patch_on_a_custom_resource_is_415(api_client, widgets, custom, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", widget("w"))
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "PATCH", f"/apis/example.com/v1/namespaces/{ns}/widgets/w", {"spec": {"size": 3}},
            "application/strategic-merge-patch+json")
    assert e.value.status == 415


def test_generation_starts_at_1_and_moves_only_on_spec_changes(custom, widgets, ns):
    w = custom.create_namespaced_custom_object(*W, ns, "widgets", widget("g"))
    assert w["metadata"]["generation"] == 1
    w = custom.patch_namespaced_custom_object(*W, ns, "widgets", "g", {"metadata": {"labels": {"a": "b"}}})
    assert w["metadata"]["generation"] == 1
    w = custom.patch_namespaced_custom_object_status(*W, ns, "widgets", "g", {"status": {"phase": "Ready"}})
    assert w["metadata"]["generation"] == 1
    w = custom.patch_namespaced_custom_object(*W, ns, "widgets", "g", {"spec": {"size": 5}})
    assert w["metadata"]["generation"] == 2


def test_status_subresource_isolation(custom, widgets, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", {**widget("s"), "status": {"phase": "Ignored"}})
    w = custom.get_namespaced_custom_object(*W, ns, "widgets", "s")
    assert "status" not in w  # status on create is dropped
    w = custom.patch_namespaced_custom_object(*W, ns, "widgets", "s", {"spec": {"size": 4},
                                                                        "status": {"phase": "Nope"}})
    assert w["spec"]["size"] == 4 and "status" not in w
    w = custom.patch_namespaced_custom_object_status(*W, ns, "widgets", "s", {
        "spec": {"size": 9}, "metadata": {"labels": {"sneaky": "yes"}}, "status": {"phase": "Ready"}})
    assert w["status"] == {"phase": "Ready"}
    assert w["spec"]["size"] == 4
    assert "sneaky" not in (w["metadata"].get("labels") or {})


def test_pod_spec_is_mostly_immutable(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "imm"}, "spec": {"containers": [
        {"name": "c", "image": "busybox:1"}]}})
    p = core.patch_namespaced_pod("imm", ns, {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}})
    assert p.spec.containers[0].image == "busybox:2"
    with pytest.raises(client.ApiException) as e:
        core.patch_namespaced_pod("imm", ns, {"spec": {"restartPolicy": "Never"}})
    assert e.value.status == 422


def test_services_get_a_cluster_ip_and_defaults(core, ns):
    svc = core.create_namespaced_service(ns, {"metadata": {"name": "svc"}, "spec": {
        "selector": {"app": "x"}, "ports": [{"port": 80}]}})
    assert svc.spec.cluster_ip.startswith("10.96.")
    assert svc.spec.type == "ClusterIP" and svc.spec.ports[0].target_port == 80


def test_secrets_string_data_is_encoded(core, ns):
    s = core.create_namespaced_secret(ns, {"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}})
    assert s.data == {"password": "aHVudGVyMg=="} and s.type == "Opaque"


def test_dry_run_stores_nothing(core, ns):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    with pytest.raises(client.ApiException) as e:
        core.read_namespaced_config_map("dry", ns)
    assert e.value.status == 404


def test_cluster_scoped_rbac_and_namespaced_leases(api_client, ns):
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_cluster_role({"metadata": {"name": f"cr-{ns}"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    assert rbac.read_cluster_role(f"cr-{ns}").rules[0].verbs == ["get"]
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "rb"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"cr-{ns}"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]})
    coord = client.CoordinationV1Api(api_client)
    lease = coord.create_namespaced_lease(ns, {"metadata": {"name": "leader"}, "spec": {
        "holderIdentity": "me", "leaseDurationSeconds": 15}})
    lease.spec.holder_identity = "you"
    assert coord.replace_namespaced_lease("leader", ns, lease).spec.holder_identity == "you"


def test_events_v1_and_core_events_share_storage(api_client, core, ns):
    ev = client.EventsV1Api(api_client)
    ev.create_namespaced_event(ns, {"metadata": {"name": "e1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                                    "reportingController": "me", "reportingInstance": "me-1", "action": "Do",
                                    "reason": "Did", "type": "Normal", "note": "hello",
                                    "regarding": {"kind": "Pod", "name": "p", "namespace": ns}})
    core_ev = core.read_namespaced_event("e1", ns)
    assert core_ev.message == "hello" and core_ev.involved_object.name == "p"
    assert ev.read_namespaced_event("e1", ns).note == "hello"


def test_invalid_label_keys_and_values_are_422(core, ns):
    for labels in ({"bad key": "v"}, {"k": "no spaces"}, {"k": "x" * 64}):
        with pytest.raises(client.ApiException) as e:
            core.create_namespaced_config_map(ns, {"metadata": {"name": "l", "labels": labels}})
        assert e.value.status == 422 and _status(e.value)["details"]["causes"][0]["field"] == "metadata.labels"
    ok = core.create_namespaced_config_map(ns, {"metadata": {"name": "l", "labels": {
        "app.kubernetes.io/name": "x", "empty": ""}, "annotations": {"example.com/any": "free text: ok"}}})
    assert ok.metadata.labels["empty"] == ""
