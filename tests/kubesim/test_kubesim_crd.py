"""CustomResourceDefinitions: served at once, discovery, schema validation/defaulting/pruning, scale, scope."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from tests.kubesim.conftest import raw, widget

W = ("example.com", "v1")


def _causes(e: client.ApiException) -> dict[str, str]:
    body = json.loads(e.body)
    assert body["reason"] == "Invalid" and body["code"] == 422
    return {c["field"]: c["reason"] for c in body["details"]["causes"]}


def test_a_new_crd_is_served_at_once_and_discoverable(api_client, widgets, custom, ns):
    doc = raw(api_client, "GET", "/apis/example.com/v1")
    res = {r["name"]: r for r in doc["resources"]}
    assert res["widgets"]["kind"] == "Widget" and res["widgets"]["shortNames"] == ["wd"]
    assert res["widgets"]["categories"] == ["all"]
    assert "widgets/status" in res and "widgets/scale" in res
    assert "example.com" in {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    crd = client.ApiextensionsV1Api(api_client).read_custom_resource_definition("widgets.example.com")
    conds = {c.type: c.status for c in crd.status.conditions}
    assert conds == {"NamesAccepted": "True", "Established": "True"}
    assert custom.list_namespaced_custom_object(*W, ns, "widgets")["items"] == []


def test_schema_defaults_are_applied_and_unknown_fields_pruned(custom, widgets, ns):
    w = custom.create_namespaced_custom_object(*W, ns, "widgets", widget("d", junk=1, extra={"any": {"x": 1}}))
    assert w["spec"] == {"size": 2, "replicas": 1, "mode": "fast", "extra": {"any": {"x": 1}}}
    assert "junk" not in custom.get_namespaced_custom_object(*W, ns, "widgets", "d")["spec"]


def test_unknown_fields_with_strict_field_validation_are_400(api_client, widgets, ns):
    with pytest.raises(client.ApiException) as e:
        raw(api_client, "POST", f"/apis/example.com/v1/namespaces/{ns}/widgets", widget("st", junk=1),
            query=[("fieldValidation", "Strict")])
    assert e.value.status == 400 and 'unknown field "spec.junk"' in json.loads(e.value.body)["message"]


def test_invalid_values_are_422_naming_every_field(custom, widgets, ns):
    bad = widget("bad", size=0, mode="medium", name="TOO-LONG-NAME", tags=["a", "b", "c", "d"], replicas="two")
    with pytest.raises(client.ApiException) as e:
        custom.create_namespaced_custom_object(*W, ns, "widgets", bad)
    causes = {(c["field"], c["reason"]) for c in json.loads(e.value.body)["details"]["causes"]}
    assert causes == {
        ("spec.size", "FieldValueInvalid"),
        ("spec.mode", "FieldValueNotSupported"),
        ("spec.name", "FieldValueTooLong"),
        ("spec.name", "FieldValueInvalid"),  # the pattern
        ("spec.tags", "FieldValueTooMany"),
        ("spec.replicas", "FieldValueTypeInvalid"),
    }
    msg = json.loads(e.value.body)["message"]
    assert msg.startswith('Widget.example.com "bad" is invalid: [')


def test_required_pattern_and_nullable(custom, widgets, ns):
    with pytest.raises(client.ApiException) as e:
        custom.create_namespaced_custom_object(*W, ns, "widgets", {**widget("r"), "spec": {"name": "abc"}})
    assert _causes(e.value) == {"spec.size": "FieldValueRequired"}
    with pytest.raises(client.ApiException) as e:
        custom.create_namespaced_custom_object(*W, ns, "widgets", widget("r", name="ab1"))
    assert _causes(e.value) == {"spec.name": "FieldValueInvalid"}
    ok = custom.create_namespaced_custom_object(*W, ns, "widgets", widget("r", note=None))
    assert "note" in ok["spec"] and ok["spec"]["note"] is None


def test_updates_are_validated_too(custom, widgets, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", widget("u"))
    with pytest.raises(client.ApiException) as e:
        custom.patch_namespaced_custom_object(*W, ns, "widgets", "u", {"spec": {"size": 11}})
    assert _causes(e.value) == {"spec.size": "FieldValueInvalid"}


def test_scale_subresource_of_a_custom_resource(api_client, custom, widgets, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", widget("sc", replicas=2))
    scale = custom.get_namespaced_custom_object_scale(*W, ns, "widgets", "sc")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    custom.patch_namespaced_custom_object_scale(*W, ns, "widgets", "sc", {"spec": {"replicas": 5}})
    w = custom.get_namespaced_custom_object(*W, ns, "widgets", "sc")
    assert w["spec"]["replicas"] == 5 and w["metadata"]["generation"] == 2


def test_cluster_scoped_crd_and_invalid_crd(api_client, custom):
    ext = client.ApiextensionsV1Api(api_client)
    ext.create_custom_resource_definition({
        "metadata": {"name": "gadgets.example.org"},
        "spec": {"group": "example.org", "scope": "Cluster",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    g = custom.create_cluster_custom_object("example.org", "v1alpha1", "gadgets", {
        "apiVersion": "example.org/v1alpha1", "kind": "Gadget", "metadata": {"name": "g1"}, "anything": [1]})
    assert g["anything"] == [1] and "namespace" not in g["metadata"]
    with pytest.raises(client.ApiException) as e:
        ext.create_custom_resource_definition({"metadata": {"name": "wrong.example.org"}, "spec": {
            "group": "example.org", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    assert "metadata.name" in _causes(e.value)


def test_multiple_versions_serve_the_same_objects(api_client, custom):
    ext = client.ApiextensionsV1Api(api_client)
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    ext.create_custom_resource_definition({
        "metadata": {"name": "dials.example.net"},
        "spec": {"group": "example.net", "scope": "Namespaced", "names": {"plural": "dials", "kind": "Dial"},
                 "versions": [{"name": "v1beta1", "served": True, "storage": False, "schema": schema},
                              {"name": "v1", "served": True, "storage": True, "schema": schema}]}})
    custom.create_namespaced_custom_object("example.net", "v1beta1", "default", "dials", {
        "apiVersion": "example.net/v1beta1", "kind": "Dial", "metadata": {"name": "d"}, "spec": {"x": 1}})
    assert custom.get_namespaced_custom_object("example.net", "v1", "default", "dials", "d")["apiVersion"] == \
        "example.net/v1"
    group = raw(api_client, "GET", "/apis/example.net")
    assert group["preferredVersion"]["version"] == "v1"


def test_selectable_fields_of_a_crd_work_in_field_selectors(custom, widgets, ns):
    custom.create_namespaced_custom_object(*W, ns, "widgets", widget("fast", mode="fast"))
    custom.create_namespaced_custom_object(*W, ns, "widgets", widget("slow", mode="slow"))
    got = custom.list_namespaced_custom_object(*W, ns, "widgets", field_selector="spec.mode=slow")
    assert [i["metadata"]["name"] for i in got["items"]] == ["slow"]
    with pytest.raises(client.ApiException) as e:
        custom.list_namespaced_custom_object(*W, ns, "widgets", field_selector="spec.size=2")
    assert e.value.status == 400
