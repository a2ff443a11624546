"""CRD conversion by webhook in kubesim, through the official client: a Gizmo stored as v1 (`spec.size: 3`) is read
as v1alpha1 (`spec.sizeText: "three"`) and written as v1alpha1, every time through the CRD's conversion webhook
(ConversionReview v1 over TLS); a failing webhook fails the request with kube-apiserver's message; strategy None
only changes apiVersion."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kubesim.testing import KubesimHandle, running_kubesim
from tests.kubesim.webhooks import Pki, WebhookServer, make_pki, webhook_server

WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
NUMBERS = {word: number for number, word in WORDS.items()}


def _schema(spec_properties: dict[str, Any]) -> dict[str, Any]:
    return {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": spec_properties},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}


def gizmo_crd(url: str, ca_pem: bytes, name: str = "gizmos.example.com", plural: str = "gizmos",
              kind: str = "Gizmo", strategy: str = "Webhook") -> dict[str, Any]:
    conversion: dict[str, Any] = {"strategy": strategy}
    if strategy == "Webhook":
        conversion["webhook"] = {"conversionReviewVersions": ["v1"], "clientConfig": {
            "url": url, "caBundle": base64.b64encode(ca_pem).decode()}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "conversion": conversion,
                     "versions": [
                         {"name": "v1alpha1", "served": True, "storage": False,
                          "schema": _schema({"sizeText": {"type": "string"}})},
                         {"name": "v1", "served": True, "storage": True,
                          "schema": _schema({"size": {"type": "integer", "minimum": 1}})}]}}


def convert(request: dict[str, Any]) -> dict[str, Any]:
    """The test's conversion webhook: v1 spec.size ↔ v1alpha1 spec.sizeText."""
    desired = request["desiredAPIVersion"]
    out = []
    for obj in request["objects"]:
        obj = json.loads(json.dumps(obj))
        spec = obj.get("spec") or {}
        if desired.endswith("/v1alpha1") and "size" in spec:
            spec["sizeText"] = WORDS[spec.pop("size")]
        elif desired.endswith("/v1") and "sizeText" in spec:
            if spec["sizeText"] not in NUMBERS:
                return {"result": {"status": "Failure", "message": f"no number is called {spec['sizeText']!r}"}}
            spec["size"] = NUMBERS[spec.pop("sizeText")]
        obj["apiVersion"] = desired
        obj.setdefault("metadata", {}).setdefault("labels", {})["converted-by"] = "webhook"
        out.append(obj)
    return {"convertedObjects": out, "result": {"status": "Success"}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), ["converter.example.svc"])


@pytest.fixture(scope="module")
def converter(pki) -> Iterator[WebhookServer]:
    with webhook_server(pki) as server:
        server.answers["/convert"] = convert
        yield server


@pytest.fixture(scope="module")
def cluster(pki, converter) -> Iterator[KubesimHandle]:
    with running_kubesim(controllers=False) as k:
        ext = client.ApiextensionsV1Api(k.api_client())
        ext.create_custom_resource_definition(gizmo_crd(converter.url("/convert"), pki.ca_pem))
        ext.create_custom_resource_definition(gizmo_crd("", b"", name="plains.example.com", plural="plains",
                                                        kind="Plain", strategy="None"))
        yield k


@pytest.fixture(scope="module")
def custom(cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture
def ns(cluster) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(cluster.api_client()).create_namespace({"metadata": {"name": name}})
    return name


def test_an_object_stored_as_v1_reads_as_v1alpha1_through_the_webhook(custom, converter, ns):
    custom.create_namespaced_custom_object("example.com", "v1", ns, "gizmos", {
        "apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"size": 3}})
    before = len(converter.for_path("/convert"))
    old = custom.get_namespaced_custom_object("example.com", "v1alpha1", ns, "gizmos", "g")
    assert old["apiVersion"] == "example.com/v1alpha1" and old["spec"] == {"sizeText": "three"}
    assert old["metadata"]["labels"] == {"converted-by": "webhook"}  # labels may change, the rest may not
    review = converter.for_path("/convert")[before]
    assert review["apiVersion"] == "apiextensions.k8s.io/v1" and review["kind"] == "ConversionReview"
    assert review["request"]["desiredAPIVersion"] == "example.com/v1alpha1"
    assert review["request"]["objects"][0]["spec"] == {"size": 3}
    listed = custom.list_namespaced_custom_object("example.com", "v1alpha1", ns, "gizmos")["items"]
    assert [i["spec"] for i in listed] == [{"sizeText": "three"}]
    assert custom.get_namespaced_custom_object("example.com", "v1", ns, "gizmos", "g")["spec"] == {"size": 3}


def test_an_object_written_as_v1alpha1_is_stored_as_v1(custom, ns):
    made = custom.create_namespaced_custom_object("example.com", "v1alpha1", ns, "gizmos", {
        "apiVersion": "example.com/v1alpha1", "kind": "Gizmo", "metadata": {"name": "old"},
        "spec": {"sizeText": "five"}})
    assert made["apiVersion"] == "example.com/v1alpha1" and made["spec"] == {"sizeText": "five"}
    assert custom.get_namespaced_custom_object("example.com", "v1", ns, "gizmos", "old")["spec"] == {"size": 5}
    custom.patch_namespaced_custom_object("example.com", "v1alpha1", ns, "gizmos", "old",
                                          {"spec": {"sizeText": "two"}})
    assert custom.get_namespaced_custom_object("example.com", "v1", ns, "gizmos", "old")["spec"] == {"size": 2}


def test_a_failing_conversion_fails_the_request_with_the_apiservers_message(custom, ns):
    with pytest.raises(client.ApiException) as info:
        custom.create_namespaced_custom_object("example.com", "v1alpha1", ns, "gizmos", {
            "apiVersion": "example.com/v1alpha1", "kind": "Gizmo", "metadata": {"name": "bad"},
            "spec": {"sizeText": "many"}})
    body = json.loads(info.value.body)
    assert info.value.status == 500 and body["reason"] == "InternalError"
    assert body["message"] == ("Internal error occurred: conversion webhook for example.com/v1alpha1, Kind=Gizmo "
                               "failed: no number is called 'many'")


def test_strategy_none_only_changes_the_api_version(custom, converter, ns):
    before = len(converter.reviews)
    custom.create_namespaced_custom_object("example.com", "v1", ns, "plains", {
        "apiVersion": "example.com/v1", "kind": "Plain", "metadata": {"name": "p"}, "spec": {"size": 3}})
    read = custom.get_namespaced_custom_object("example.com", "v1alpha1", ns, "plains", "p")
    assert read["apiVersion"] == "example.com/v1alpha1" and read["spec"] == {"size": 3}
    assert len(converter.reviews) == before


def test_a_webhook_conversion_needs_its_client_config(cluster):
    ext = client.ApiextensionsV1Api(cluster.api_client())
    crd = gizmo_crd("", b"", name="broken.example.com", plural="broken", kind="Broken")
    crd["spec"]["conversion"]["webhook"] = {"conversionReviewVersions": ["v1beta1"], "clientConfig": {}}
    with pytest.raises(client.ApiException) as info:
        ext.create_custom_resource_definition(crd)
    fields = {c["field"] for c in json.loads(info.value.body)["details"]["causes"]}
    assert fields == {"spec.conversion.webhook.clientConfig", "spec.conversion.webhook.conversionReviewVersions"}


def test_a_deprecated_version_warns_and_a_storage_switch_keeps_the_old_stored_version(cluster, custom, ns):
    api = cluster.api_client()
    ext = client.ApiextensionsV1Api(api)
    custom.create_namespaced_custom_object("example.com", "v1", ns, "plains", {
        "apiVersion": "example.com/v1", "kind": "Plain", "metadata": {"name": "before"}, "spec": {"size": 1}})
    crd = ext.read_custom_resource_definition("plains.example.com").to_dict()
    ext.patch_custom_resource_definition("plains.example.com", {"spec": {"versions": [
        {"name": "v1alpha1", "served": True, "storage": True, "deprecated": True,
         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        {"name": "v1", "served": True, "storage": False,
         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
    assert crd["status"]["stored_versions"] == ["v1"]
    crd = ext.read_custom_resource_definition("plains.example.com").to_dict()
    assert crd["status"]["stored_versions"] == ["v1", "v1alpha1"]  # objects stored as v1 are still there
    resp = api.call_api(f"/apis/example.com/v1alpha1/namespaces/{ns}/plains/before", "GET",
                        auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True)
    assert resp.status == 200
    assert resp.headers.get("Warning") == '299 - "example.com/v1alpha1 Plain is deprecated; use example.com/v1 Plain"'
    assert json.loads(resp.data)["apiVersion"] == "example.com/v1alpha1"
    resp = api.call_api(f"/apis/example.com/v1/namespaces/{ns}/plains/before", "GET",
                        auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True)
    assert resp.headers.get("Warning") is None
