"""ownerReferences on write: at most one controller reference (422 Invalid, as apimachinery's
ValidateOwnerReferences), on create, update, merge patch and server-side apply, for built-in and custom
resources; server-side apply merges ownerReferences by uid, writes nothing when nothing differs, and puts back
fields someone else changed."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.kubesim.conftest import raw, widget

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


@pytest.fixture()
def owners(custom, widgets, ns) -> dict[str, str]:
    """Widgets a, b and c (real owners: the garbage collector removes what only missing owners own): their uids."""
    return {n: custom.create_namespaced_custom_object("example.com", "v1", ns, "widgets", widget(n))["metadata"]["uid"]
            for n in "abc"}


def _ref(name: str, uid: str, controller: bool | None = True) -> dict:
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": name, "uid": uid}
    if controller is not None:
        ref["controller"] = controller
    return ref


def _invalid(e: client.ApiException) -> dict:
    assert e.status == 422
    body = json.loads(e.body)
    assert body["kind"] == "Status" and body["reason"] == "Invalid"
    (c,) = body["details"]["causes"]
    assert c["field"] == "metadata.ownerReferences" and c["reason"] == "FieldValueInvalid"
    return body


def _apply(api_client, path: str, body: dict, manager: str = "tester") -> dict:
    return raw(api_client, "PATCH", path, body, APPLY, query=[("fieldManager", manager), ("force", "true")])


def test_two_controller_references_are_refused_on_create(core, ns, owners):
    refs = [_ref("a", owners["a"]), _ref("b", owners["b"], controller=False),
            {**_ref("c", owners["c"]), "apiVersion": "test.example.com/v1", "kind": "Gadget"}]
    with pytest.raises(client.ApiException) as e:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "two", "ownerReferences": refs}})
    body = _invalid(e.value)
    assert body["details"]["name"] == "two" and body["details"]["kind"] == "ConfigMap"
    cause = body["details"]["causes"][0]["message"]
    assert cause.startswith("Invalid value: []v1.OwnerReference{")
    assert cause.endswith('Only one reference can have Controller set to true. Found "true" in references for '
                          "Widget/a and Gadget/c")
    assert body["message"].startswith('ConfigMap "two" is invalid: metadata.ownerReferences: Invalid value: ')
    # one controller next to any number of other references is fine
    ok = core.create_namespaced_config_map(ns, {"metadata": {"name": "one", "ownerReferences": refs[:2]}})
    assert [r.uid for r in ok.metadata.owner_references] == [owners["a"], owners["b"]]


def test_a_second_controller_reference_is_refused_on_update_and_patch(api_client, core, ns, owners):
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm", "ownerReferences": [_ref("a", owners["a"])]}})
    path = f"/api/v1/namespaces/{ns}/configmaps/cm"
    current = raw(api_client, "GET", path)
    current["metadata"]["ownerReferences"].append(_ref("b", owners["b"]))
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "PUT", path, current)
    _invalid(e.value)
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "PATCH", path, {"metadata": {"ownerReferences": current["metadata"]["ownerReferences"]}},
            MERGE)
    _invalid(e.value)
    # replacing the controller (one reference left) is allowed
    patched = raw(api_client, "PATCH", path, {"metadata": {"ownerReferences": [_ref("b", owners["b"])]}}, MERGE)
    assert [r["uid"] for r in patched["metadata"]["ownerReferences"]] == [owners["b"]]


def test_apply_merges_owner_references_by_uid_so_a_second_controller_is_refused(api_client, ns, owners):
    for path, body in (
        (f"/api/v1/namespaces/{ns}/configmaps/cm",
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}),
        (f"/apis/example.com/v1/namespaces/{ns}/widgets/owned", widget("owned")),
    ):
        body["metadata"]["ownerReferences"] = [_ref("a", owners["a"])]
        _apply(api_client, path, body, "first")
        body["metadata"]["ownerReferences"] = [_ref("b", owners["b"])]
        with pytest.raises(client.ApiException) as e:
            _apply(api_client, path, body, "second")
        _invalid(e.value)
        # a reference that is no controller is merged next to the controller's, not put in its place
        body["metadata"]["ownerReferences"] = [_ref("c", owners["c"], controller=False)]
        merged = _apply(api_client, path, body, "third")
        assert [r["uid"] for r in merged["metadata"]["ownerReferences"]] == [owners["a"], owners["c"]], path


def test_apply_writes_nothing_when_nothing_differs_and_puts_back_what_someone_else_changed(api_client, ns):
    path = f"/api/v1/namespaces/{ns}/configmaps/cm"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}}
    first = _apply(api_client, path, body)
    again = _apply(api_client, path, body)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    tampered = raw(api_client, "PATCH", path, {"data": {"a": "tampered", "c": "theirs"}}, MERGE)
    assert tampered["data"] == {"a": "tampered", "b": "2", "c": "theirs"}
    back = _apply(api_client, path, body)
    assert back["data"] == {"a": "1", "b": "2", "c": "theirs"}  # a field nobody applied stays
    assert back["metadata"]["resourceVersion"] != tampered["metadata"]["resourceVersion"]
    body["data"] = {"a": "1"}
    released = _apply(api_client, path, body)
    assert released["data"] == {"a": "1", "c": "theirs"}  # the manager stopped applying b
