"""/openapi/v2: the custom resources' Swagger 2.0 definitions and paths, as JSON and as gnostic protobuf, rebuilt
when CRDs change; and kubectl reading it (``kubectl explain --output=plaintext-openapiv2`` is what asks for it)."""

from __future__ import annotations

import copy
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kubesim.server.openapi_v2 import to_v2_schema
from kubesim.testing import running_kubesim, wait_for
from tests.kubesim.conftest import raw

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
WIDGET = "com.example.v1.Widget"
GROUP = "openapi-v2.example.com"
SPROCKET_V1 = {
    "name": "v1", "served": True, "storage": True,
    "schema": {"openAPIV3Schema": {
        "type": "object",
        "description": "A sprocket.",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["teeth", "label"],
                "properties": {
                    "teeth": {"type": "integer", "minimum": 3, "default": 12},
                    "label": {"type": "string", "nullable": True},
                    "finish": {"type": "string", "enum": ["matte", "gloss"], "oneOf": [{"pattern": "^m"}]},
                    "holes": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
                    "raw": {"type": "array", "x-kubernetes-preserve-unknown-fields": True,
                            "items": {"type": "string"}},
                    "port": {"x-kubernetes-int-or-string": True,
                             "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                 "properties": {"spec": {"type": "object"}}},
                },
            },
        },
    }},
}


def _sprocket_crd(*versions: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"sprockets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Cluster",
                 "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"},
                 "versions": list(versions)},
    }


def _v2(api_client: client.ApiClient) -> dict[str, Any]:
    return raw(api_client, "GET", "/openapi/v2")


def _get(api_client: client.ApiClient, accept: str, etag: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    """GET /openapi/v2 through the client's transport: status, body, headers (304 answers too)."""
    headers = {"Accept": accept, **({"If-None-Match": etag} if etag else {})}
    try:
        resp = api_client.call_api("/openapi/v2", "GET", header_params=headers, auth_settings=["BearerToken"],
                                   _preload_content=False, _return_http_data_only=True)
    except client.ApiException as e:
        return e.status, b"", dict(e.headers or {})
    return resp.status, resp.data, dict(resp.headers)


# ---- JSON ------------------------------------------------------------------------------------------------------

def test_a_crds_schema_is_a_definition_named_as_kube_apiserver_names_it(api_client, widgets):
    doc = _v2(api_client)
    assert doc["swagger"] == "2.0"
    w = doc["definitions"][WIDGET]
    assert w["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1"}]
    assert w["x-kubernetes-selectable-fields"] == [{"fieldPath": "spec.mode"}]
    assert w["type"] == "object"
    assert w["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert w["properties"]["apiVersion"]["type"] == w["properties"]["kind"]["type"] == "string"
    meta = doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert meta["properties"]["name"]["type"] == "string"
    spec = w["properties"]["spec"]
    assert spec["required"] == ["size"]
    size, mode = spec["properties"]["size"], spec["properties"]["mode"]
    assert size == {"type": "integer", "minimum": 1, "maximum": 10}
    assert mode["enum"] == ["fast", "slow"] and mode["type"] == "string"
    assert spec["properties"]["name"] == {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"}
    assert spec["properties"]["tags"] == {"type": "array", "items": {"type": "string"}, "maxItems": 3}
    # kube-apiserver prunes defaults from the v2 document (the v3 one keeps them)
    assert "default" not in mode and "default" not in spec["properties"]["replicas"]
    # nullable is no v2 keyword: the field is left untyped
    assert spec["properties"]["note"] == {}
    # a field preserving unknown fields keeps the extension, loses its type
    assert spec["properties"]["extra"] == {"x-kubernetes-preserve-unknown-fields": True}
    # every $ref resolves (kubectl refuses a document with a dangling one)
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    assert refs and all(r.removeprefix("#/definitions/") in doc["definitions"] for r in refs)


def test_a_crds_list_kind_and_paths_are_published(api_client, widgets):
    doc = _v2(api_client)
    lst = doc["definitions"]["com.example.v1.WidgetList"]
    assert lst["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "WidgetList",
                                                       "version": "v1"}]
    assert lst["properties"]["items"]["items"] == {"$ref": f"#/definitions/{WIDGET}"}
    paths = doc["paths"]
    collection = "/apis/example.com/v1/namespaces/{namespace}/widgets"
    item = collection + "/{name}"
    assert set(paths[collection]) == {"get", "post", "delete", "parameters"}
    assert set(paths[item]) == {"get", "put", "delete", "patch", "parameters"}
    assert set(paths[item + "/status"]) == set(paths[item + "/scale"]) == {"get", "put", "patch", "parameters"}
    assert paths["/apis/example.com/v1/widgets"]["get"]["operationId"] == "listExampleComV1WidgetForAllNamespaces"
    actions = {(p, m): op["x-kubernetes-action"] for p, ops in paths.items() if p.startswith(collection)
               for m, op in ops.items() if m != "parameters"}
    assert actions[(collection, "get")] == "list" and actions[(collection, "post")] == "post"
    assert actions[(collection, "delete")] == "deletecollection"
    assert [actions[(item, m)] for m in ("get", "put", "patch", "delete")] == ["get", "put", "patch", "delete"]
    patch = paths[item]["patch"]
    assert patch["operationId"] == "patchExampleComV1NamespacedWidget"
    assert patch["x-kubernetes-group-version-kind"] == {"group": "example.com", "kind": "Widget", "version": "v1"}
    assert "application/merge-patch+json" in patch["consumes"]
    assert "application/strategic-merge-patch+json" not in patch["consumes"]
    assert {p["name"] for p in patch["parameters"]} >= {"body", "fieldValidation", "fieldManager", "dryRun"}
    assert patch["responses"]["200"]["schema"] == {"$ref": f"#/definitions/{WIDGET}"}
    assert paths[item + "/scale"]["get"]["responses"]["200"]["schema"] == {
        "$ref": "#/definitions/io.k8s.api.autoscaling.v1.Scale"}
    assert paths[collection]["post"]["operationId"] == "createExampleComV1NamespacedWidget"
    assert paths[collection]["delete"]["operationId"] == "deleteExampleComV1CollectionNamespacedWidget"
    assert {p["name"] for p in paths[item]["parameters"]} == {"name", "namespace", "pretty"}
    # built-in kinds are not described
    assert not any(p.startswith("/api/") or p.startswith("/apis/apps/") for p in paths)


def test_versions_appear_and_go_with_the_crd_and_the_etag_follows(api_client):
    ext = client.ApiextensionsV1Api(api_client)
    status, _, headers = _get(api_client, "application/json")
    first_etag = headers["ETag"]
    assert status == 200 and _get(api_client, "application/json", first_etag)[0] == 304
    ext.create_custom_resource_definition(_sprocket_crd(SPROCKET_V1))
    try:
        doc = _v2(api_client)
        v1 = doc["definitions"]["com.example.openapi-v2.v1.Sprocket"]
        assert "com.example.openapi-v2.v2.Sprocket" not in doc["definitions"]
        assert v1["description"] == "A sprocket."
        spec = v1["properties"]["spec"]
        # nullable "label" is no longer required; the default is pruned; oneOf and anyOf are dropped
        assert spec["required"] == ["teeth"]
        assert spec["properties"]["teeth"] == {"type": "integer", "minimum": 3}
        assert spec["properties"]["label"] == {}
        assert spec["properties"]["finish"] == {"type": "string", "enum": ["matte", "gloss"]}
        assert spec["properties"]["holes"] == {"type": "array", "x-kubernetes-list-type": "set",
                                               "items": {"type": "integer"}}
        assert spec["properties"]["raw"] == {"x-kubernetes-preserve-unknown-fields": True}
        assert spec["properties"]["port"] == {"x-kubernetes-int-or-string": True}
        assert spec["properties"]["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
        template = spec["properties"]["template"]
        assert set(template["properties"]) == {"apiVersion", "kind", "metadata", "spec"}
        assert template["required"] == ["kind", "apiVersion"]
        # a cluster-scoped kind: no namespace in its paths, no list across namespaces
        assert "/apis/openapi-v2.example.com/v1/sprockets/{name}" in doc["paths"]
        assert not any(p.startswith(f"/apis/{GROUP}/v1/namespaces") for p in doc["paths"])
        etag = _get(api_client, "application/json")[2]["ETag"]
        assert etag != first_etag

        crd = ext.read_custom_resource_definition(f"sprockets.{GROUP}")
        v2 = copy.deepcopy(SPROCKET_V1) | {"name": "v2", "storage": False}
        v2["schema"]["openAPIV3Schema"]["x-kubernetes-preserve-unknown-fields"] = True
        crd.spec.versions.append(v2)
        ext.replace_custom_resource_definition(f"sprockets.{GROUP}", crd)
        doc = _v2(api_client)
        assert doc["definitions"]["com.example.openapi-v2.v1.Sprocket"] == v1
        # a root that preserves unknown fields is published as a bare object
        assert doc["definitions"]["com.example.openapi-v2.v2.Sprocket"] == {
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": GROUP, "kind": "Sprocket", "version": "v2"}]}
        assert "com.example.openapi-v2.v2.SprocketList" in doc["definitions"]
        assert f"/apis/{GROUP}/v2/sprockets/{{name}}" in doc["paths"]
        assert _get(api_client, "application/json", etag)[0] == 200
    finally:
        ext.delete_custom_resource_definition(f"sprockets.{GROUP}")
    doc = wait_for(lambda: (d := _v2(api_client)) and "com.example.openapi-v2.v1.Sprocket" not in d["definitions"]
                   and d)
    assert not any(name.startswith("com.example.openapi-v2.") for name in doc["definitions"])
    assert not any(p.startswith(f"/apis/{GROUP}/") for p in doc["paths"])


def test_the_document_is_built_once_per_registry_change(api_client, widgets, monkeypatch):
    from kubesim.server import openapi_v2

    builds: list[int] = []
    original = openapi_v2.build_document

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        builds.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(openapi_v2, "build_document", counting)
    for _ in range(3):
        _v2(api_client)
        _get(api_client, PROTOBUF)
    assert len(builds) <= 1


# ---- the conversion on its own -------------------------------------------------------------------------------------

def test_conversion_of_nullable_additional_properties_and_junctors():
    schema = {"type": "object", "required": ["a", "b"], "allOf": [{"required": ["a"]}], "not": {"required": ["c"]},
              "additionalProperties": {"type": "string", "nullable": True}, "example": {"a": 1},
              "externalDocs": {"url": "https://example.com"}}
    assert to_v2_schema(schema) == {"type": "object", "additionalProperties": {}}
    assert to_v2_schema({"type": "array", "nullable": True, "items": {"type": "string"}}) == {}
    assert to_v2_schema({"type": "object", "x-kubernetes-embedded-resource": True,
                         "x-kubernetes-preserve-unknown-fields": True}) == {
        "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}


# ---- protobuf ------------------------------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, Any]]:
    """A protobuf message's fields in order: (number, int | bytes)."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((key >> 3, value))
    return out


def _one(buf: bytes, num: int) -> Any:
    values = [v for n, v in _fields(buf) if n == num]
    assert len(values) == 1, (num, values)
    return values[0]


def _all(buf: bytes, num: int) -> list[Any]:
    return [v for n, v in _fields(buf) if n == num]


def _named(buf: bytes, num: int) -> dict[str, bytes]:
    """Repeated Named* entries (name 1, value 2) at field ``num``."""
    return {_one(e, 1).decode(): _one(e, 2) for e in _all(buf, num)}


def _extensions(buf: bytes, num: int) -> dict[str, str]:
    """Vendor extensions (NamedAny at ``num``): name → Any.yaml text."""
    return {name: _one(any_, 2).decode() for name, any_ in _named(buf, num).items()}


def test_protobuf_is_the_same_document_as_a_gnostic_openapi_v2_document(api_client, widgets):
    import yaml

    status, body, headers = _get(api_client, PROTOBUF)
    assert status == 200 and headers["Content-Type"].endswith("+protobuf") and body
    assert _get(api_client, PROTOBUF, headers["ETag"])[0] == 304
    assert _one(body, 1) == b"2.0"  # swagger
    definitions = _named(_one(body, 9), 1)  # Definitions.additional_properties (NamedSchema)
    assert WIDGET in definitions and "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in definitions
    widget = definitions[WIDGET]
    gvk = yaml.safe_load(_extensions(widget, 31)["x-kubernetes-group-version-kind"])  # Schema.vendor_extension
    assert gvk == [{"group": "example.com", "kind": "Widget", "version": "v1"}]
    assert _all(_one(widget, 22), 1) == [b"object"]  # Schema.type → TypeItem.value
    props = _named(_one(widget, 25), 1)  # Schema.properties → Properties.additional_properties
    assert _one(props["metadata"], 1) == b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    spec = props["spec"]
    assert _all(spec, 19) == [b"size"]  # required
    spec_props = _named(_one(spec, 25), 1)
    mode = spec_props["mode"]
    assert [yaml.safe_load(_one(a, 2)) for a in _all(mode, 20)] == ["fast", "slow"]  # enum (Any.yaml)
    assert not _all(mode, 5)  # no default
    size = spec_props["size"]
    assert struct.unpack("<d", _one(size, 9)) == (1.0,) and struct.unpack("<d", _one(size, 7)) == (10.0,)
    assert _fields(spec_props["note"]) == []  # nullable: untyped
    paths = _named(_one(body, 8), 2)  # Paths.path (NamedPathItem)
    item = paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]
    patch = _one(item, 8)  # PathItem.patch
    assert _one(patch, 5) == b"patchExampleComV1NamespacedWidget"  # operation_id
    ext = _extensions(patch, 13)
    assert yaml.safe_load(ext["x-kubernetes-action"]) == "patch"
    assert yaml.safe_load(ext["x-kubernetes-group-version-kind"]) == {"group": "example.com", "kind": "Widget",
                                                                      "version": "v1"}
    # parameters: ParametersItem.parameter → Parameter.non_body_parameter → query sub-schema, name = 4
    query_names = []
    for param in _all(patch, 8):
        parameter = _one(param, 1)
        non_body = [v for n, v in _fields(parameter) if n == 2]
        if non_body:
            query_names.append(_one(_one(non_body[0], 3), 4).decode())
    assert "fieldValidation" in query_names


# ---- kubectl -------------------------------------------------------------------------------------------------------

KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory) -> Iterator[Any]:
    """kubectl against a TLS kubesim of this module (kubectl only sends bearer tokens over TLS)."""
    if KUBECTL is None:
        pytest.skip("kubectl is not on PATH")
    home = tmp_path_factory.mktemp("kubectl-v2-home")
    with running_kubesim(tls=True) as k:
        env = dict(os.environ, KUBECONFIG=k.kubeconfig, HOME=str(home))

        def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
            proc = subprocess.run([KUBECTL, "--cache-dir", str(home / "cache"), *args], env=env,
                                  capture_output=True, text=True, timeout=30)
            if check and proc.returncode != 0:
                raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
            return proc

        yield run


def test_kubectl_explains_a_crd_from_openapi_v2(kubectl, tmp_path):
    import json

    from tests.kubesim.conftest import WIDGET_CRD

    (tmp_path / "crd.json").write_text(json.dumps(WIDGET_CRD))
    kubectl("apply", "-f", str(tmp_path / "crd.json"))
    wait_for(lambda: kubectl("explain", "widgets", "--output=plaintext-openapiv2", check=False).returncode == 0,
             timeout=10)
    spec = kubectl("explain", "widgets.spec", "--output=plaintext-openapiv2").stdout
    assert "KIND:     Widget" in spec and "VERSION:  example.com/v1" in spec
    assert "size\t<integer> -required-" in spec and "mode\t<string>" in spec
    top = kubectl("explain", "widgets", "--output=plaintext-openapiv2", "--recursive").stdout
    assert "metadata\t<Object>" in top and "labels\t<map[string]string>" in top
    # the v2 document changes with the CRD: a removed CRD is no longer explained
    kubectl("delete", "crd", "widgets.example.com")
    wait_for(lambda: kubectl("explain", "widgets.spec", "--output=plaintext-openapiv2",
                             check=False).returncode != 0, timeout=10)
