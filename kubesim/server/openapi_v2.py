"""The /openapi/v2 document: each served CRD version's schema and paths in Swagger 2.0, as JSON or as protobuf.

kube-apiserver publishes a custom resource in its Swagger 2.0 document the way apiextensions-apiserver's
OpenAPI builder writes it: the version's structural openAPIV3Schema converted to what Swagger 2.0 and kubectl
can read (``allOf``/``oneOf``/``anyOf``/``not`` dropped, a ``nullable`` field left untyped and no longer
required, a field that preserves unknown fields left untyped and without properties or items, an array without
items left untyped, ``x-kubernetes-*`` extensions kept, defaults pruned), ``apiVersion``, ``kind`` and a
``metadata`` reference to ObjectMeta set on the kind, and ``x-kubernetes-group-version-kind`` naming it; the
list kind beside it; and the collection, item, status and scale paths with their operations.
:func:`build_document` writes that document from the served types; :func:`encode_document` writes the same
document as a gnostic ``openapi_v2.Document`` protobuf message (the form kubectl asks for).

Built-in kinds are not described (their paths and definitions are absent); the helper definitions the CRD
paths refer to (ObjectMeta, ListMeta, Status, Patch, DeleteOptions, Scale) are abridged.
"""

from __future__ import annotations

import copy
import json
import struct
from collections.abc import Callable, Iterable
from typing import Any

from kubesim.registry import ResourceType

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

_API_VERSION = {"type": "string", "description": (
    "APIVersion defines the versioned schema of this representation of an object. Servers should convert "
    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources")}
_KIND = {"type": "string", "description": (
    "Kind is a string value representing the REST resource this object represents. Servers may infer this "
    "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")}
_METADATA_DOC = ("Standard object's metadata. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
_LIST_METADATA_DOC = ("Standard list metadata. More info: "
                      "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")


def _ref(name: str) -> dict[str, str]:
    """A reference to definition ``name``."""
    return {"$ref": f"#/definitions/{name}"}


# ---- the helper definitions CRD paths refer to (abridged) ---------------------------------------------------------

def meta_definitions(object_meta: dict[str, Any]) -> dict[str, Any]:
    """ObjectMeta (as given), ListMeta, Status, Patch, DeleteOptions and autoscaling/v1 Scale: every definition a
    CRD's definitions and paths refer to, so that each ``$ref`` resolves (kubectl refuses dangling ones)."""
    s, i64, i32 = {"type": "string"}, {"type": "integer", "format": "int64"}, {"type": "integer", "format": "int32"}
    return {
        OBJECT_META: object_meta,
        LIST_META: {
            "description": "ListMeta describes metadata that synthetic resources must have, including lists and "
                           "various status objects.",
            "type": "object",
            "properties": {
                "continue": {**s, "description": "continue may be set if the user set a limit on the number of "
                                                 "items returned."},
                "remainingItemCount": {**i64, "description": "The number of subsequent items in the list which "
                                                             "are not included in this list response."},
                "resourceVersion": {**s, "description": "The version of this object, as the server knows it."},
                "selfLink": {**s, "description": "Deprecated: selfLink is a legacy read-only field."},
            },
        },
        STATUS: {
            "description": "Status is a return value for calls that don't return other objects.",
            "type": "object",
            "properties": {
                "apiVersion": _API_VERSION,
                "code": {**i32, "description": "Suggested HTTP return code for this status, 0 if not set."},
                "details": {"type": "object", "description": "Extended data associated with the reason.",
                            "properties": {"name": s, "group": s, "kind": s, "uid": s,
                                           "retryAfterSeconds": i32,
                                           "causes": {"type": "array", "items": {
                                               "type": "object",
                                               "properties": {"field": s, "message": s, "reason": s}}}}},
                "kind": _KIND,
                "message": {**s, "description": "A human-readable description of the status of this operation."},
                "metadata": {**_ref(LIST_META), "description": _LIST_METADATA_DOC},
                "reason": {**s, "description": "A machine-readable description of why this operation is in the "
                                               "\"Failure\" status."},
                "status": {**s, "description": "Status of the operation. One of: \"Success\" or \"Failure\"."},
            },
        },
        PATCH: {"description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH "
                               "request body.", "type": "object"},
        DELETE_OPTIONS: {
            "description": "DeleteOptions may be provided when deleting an API object.",
            "type": "object",
            "properties": {
                "apiVersion": _API_VERSION,
                "dryRun": {"type": "array", "items": s, "description": "When present, indicates that "
                                                                       "modifications should not be persisted."},
                "gracePeriodSeconds": {**i64, "description": "The duration in seconds before the object should "
                                                             "be deleted."},
                "kind": _KIND,
                "orphanDependents": {"type": "boolean", "description": "Deprecated: please use the "
                                                                       "PropagationPolicy."},
                "preconditions": {"type": "object", "description": "Must be fulfilled before a deletion is "
                                                                   "carried out.",
                                  "properties": {"resourceVersion": s, "uid": s}},
                "propagationPolicy": {**s, "description": "Whether and how garbage collection will be performed: "
                                                          "Orphan, Background or Foreground."},
            },
        },
        SCALE: {
            "description": "Scale represents a scaling request for a resource.",
            "type": "object",
            "properties": {
                "apiVersion": _API_VERSION,
                "kind": _KIND,
                "metadata": {**_ref(OBJECT_META), "description": _METADATA_DOC},
                "spec": {"type": "object", "description": "Defines the behavior of the scale.",
                         "properties": {"replicas": {**i32, "description": "The desired number of instances for "
                                                                           "the scaled object."}}},
                "status": {"type": "object", "description": "The current status of the scale.",
                           "required": ["replicas"],
                           "properties": {"replicas": {**i32, "description": "The actual number of observed "
                                                                             "instances of the scaled object."},
                                          "selector": {**s, "description": "The label query over pods that "
                                                                           "should match the replicas count."}}},
            },
            "x-kubernetes-group-version-kind": [{"group": "autoscaling", "kind": "Scale", "version": "v1"}],
        },
    }


# ---- structural v3 schema → v2 ---------------------------------------------------------------------------------

#: the JSONSchemaProps fields a structural schema keeps (``default`` is pruned from the published v2 document,
#: ``example`` and ``externalDocs`` are not part of a structural schema; junctors are dropped for v2)
_KEPT = ("description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
         "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "enum",
         "maxProperties", "minProperties", "required")


def to_v2_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A CRD's structural OpenAPI v3 schema as kube-apiserver publishes it in Swagger 2.0 (see the module)."""
    out: dict[str, Any] = {k: copy.deepcopy(schema[k]) for k in _KEPT if k in schema}
    out.update({k: copy.deepcopy(v) for k, v in schema.items() if k.startswith("x-kubernetes-")})
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else None
    items = schema.get("items") if isinstance(schema.get("items"), dict) else None
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    if schema.get("nullable") is True:
        # an untyped value: kubectl breaks on a typed one that may be null, and on items or properties without a type
        out.pop("type", None)
        props = items = None
    if preserve:
        props = items = None
    if items is None and out.get("type") == "array":
        out.pop("type")
    if preserve and out.get("type") == "object":
        out.pop("type")
    required = out.get("required") if isinstance(out.get("required"), list) else None
    if required is not None and props:
        # a field that may be null is no longer required
        required = [r for r in required if not (isinstance(props.get(r), dict) and props[r].get("nullable") is True)]
    if isinstance(additional, dict) and additional.get("nullable") is True:
        required = None
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    if props:
        out["properties"] = {name: to_v2_schema(p) for name, p in sorted(props.items()) if isinstance(p, dict)}
    if items is not None:
        out["items"] = to_v2_schema(items)
    if isinstance(additional, dict):
        out["additionalProperties"] = to_v2_schema(additional)
    elif isinstance(additional, bool):
        out["additionalProperties"] = additional
    if schema.get("x-kubernetes-embedded-resource") is True and not preserve:
        # an embedded object is described like a top-level one
        fields = out.setdefault("properties", {})
        fields["apiVersion"] = dict(_API_VERSION)
        fields["kind"] = dict(_KIND)
        fields["metadata"] = {**_ref(OBJECT_META), "description": _METADATA_DOC}
        req = out.setdefault("required", [])
        req.extend(k for k in ("kind", "apiVersion") if k not in req)
    return out


def kind_definition(schema: dict[str, Any] | None, group: str, version: str, kind: str,
                    selectable: list[str]) -> dict[str, Any]:
    """The definition of one CRD version's kind: its schema in v2 form with apiVersion, kind and metadata, or a bare
    ``type: object`` when it has no schema or its root preserves unknown fields (kubectl would otherwise refuse
    every field but those three); ``x-kubernetes-group-version-kind`` and, when the version declares any,
    ``x-kubernetes-selectable-fields``."""
    if not schema or schema.get("x-kubernetes-preserve-unknown-fields") is True:
        out: dict[str, Any] = {"type": "object"}
    else:
        out = to_v2_schema(schema)
        props = out.setdefault("properties", {})
        props["apiVersion"] = dict(_API_VERSION)
        props["kind"] = dict(_KIND)
        props["metadata"] = {**_ref(OBJECT_META), "description": _METADATA_DOC}
        out["properties"] = dict(sorted(props.items()))
    out["x-kubernetes-group-version-kind"] = [{"group": group, "kind": kind, "version": version}]
    if selectable:
        out["x-kubernetes-selectable-fields"] = [{"fieldPath": p} for p in selectable]
    return out


def list_definition(definition_name: str, group: str, version: str, plural: str, kind: str,
                    list_kind: str) -> dict[str, Any]:
    """The definition of a CRD version's list kind."""
    return {
        "description": f"{list_kind} is a list of {kind}",
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": dict(_API_VERSION),
            "items": {"type": "array", "items": _ref(definition_name),
                      "description": f"List of {plural}. More info: "
                                     "https://git.k8s.io/community/contributors/devel/sig-architecture/"
                                     "api-conventions.md"},
            "kind": dict(_KIND),
            "metadata": {**_ref(LIST_META), "description": _LIST_METADATA_DOC},
        },
        "x-kubernetes-group-version-kind": [{"group": group, "kind": list_kind, "version": version}],
    }


# ---- paths ------------------------------------------------------------------------------------------------------

def _query(name: str, kind: str, description: str) -> dict[str, Any]:
    """A query parameter as kube-apiserver declares it."""
    return {"uniqueItems": True, "type": kind, "description": description, "name": name, "in": "query"}


_Q = {
    "allowWatchBookmarks": _query("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events "
                                                                    "with type \"BOOKMARK\"."),
    "continue": _query("continue", "string", "The continue option should be set when retrieving more results from "
                                             "the server."),
    "dryRun": _query("dryRun", "string", "When present, indicates that modifications should not be persisted. "
                                         "Valid values are: - All: all dry run stages will be processed"),
    "fieldManager": _query("fieldManager", "string", "fieldManager is a name associated with the actor or entity "
                                                     "that is making these changes."),
    "fieldSelector": _query("fieldSelector", "string", "A selector to restrict the list of returned objects by "
                                                       "their fields. Defaults to everything."),
    "fieldValidation": _query("fieldValidation", "string", "fieldValidation instructs the server on how to handle "
                                                           "objects in the request containing unknown or duplicate "
                                                           "fields: Ignore, Warn or Strict."),
    "force": _query("force", "boolean", "Force is going to \"force\" Apply requests."),
    "gracePeriodSeconds": _query("gracePeriodSeconds", "integer", "The duration in seconds before the object should "
                                                                  "be deleted."),
    "labelSelector": _query("labelSelector", "string", "A selector to restrict the list of returned objects by "
                                                       "their labels. Defaults to everything."),
    "limit": _query("limit", "integer", "limit is a maximum number of responses to return for a list call."),
    "orphanDependents": _query("orphanDependents", "boolean", "Deprecated: please use the PropagationPolicy."),
    "pretty": _query("pretty", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless "
                                         "the user-agent indicates a browser or command-line HTTP tool."),
    "propagationPolicy": _query("propagationPolicy", "string", "Whether and how garbage collection will be "
                                                               "performed: Orphan, Background or Foreground."),
    "resourceVersion": _query("resourceVersion", "string", "resourceVersion sets a constraint on what resource "
                                                           "versions a request may be served from."),
    "resourceVersionMatch": _query("resourceVersionMatch", "string", "resourceVersionMatch determines how "
                                                                     "resourceVersion is applied to list calls."),
    "sendInitialEvents": _query("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with "
                                                                "`watch=true`."),
    "timeoutSeconds": _query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
    "watch": _query("watch", "boolean", "Watch for changes to the described resources and return them as a stream "
                                        "of add, update, and remove notifications."),
}
_LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
                "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_DELETECOLLECTION_PARAMS = ("continue", "dryRun", "fieldSelector", "gracePeriodSeconds", "labelSelector", "limit",
                            "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch",
                            "sendInitialEvents", "timeoutSeconds")
_PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]


def _operation_id_part(s: str, capitalize_first: bool) -> str:
    """kube-apiserver's operation-id spelling of a path segment: punctuation dropped, each word capitalized."""
    out, capitalize = [], capitalize_first
    for i, ch in enumerate(s):
        if ch.isalpha() or ch == "_" or (i and ch.isdigit()):
            out.append(ch.upper() if capitalize else ch)
            capitalize = False
        else:
            capitalize = True
    return "".join(out)


_VERB_PREFIXES = ("get", "log", "read", "replace", "patch", "delete", "watch", "connect", "proxy", "list", "create")


def _operation_id(op: str, group: str, version: str) -> tuple[str, list[str]]:
    """The operation id and tag kube-apiserver gives route ``op`` of group/version (listNamespacedWidget of
    example.com/v1 → listExampleComV1NamespacedWidget, tag exampleCom_v1)."""
    verb = min((p for p in _VERB_PREFIXES if op.startswith(p)), key=len)
    trimmed = group.removesuffix(".k8s.io")
    prefix = verb + _operation_id_part(trimmed, True) + _operation_id_part(version, True)
    tag = _operation_id_part(trimmed, False) + "_" + _operation_id_part(version, False)
    return prefix + _operation_id_part(op[len(verb):], True), [tag]


def _article(noun: str) -> str:
    """The indefinite article before ``noun``, spaced."""
    return " an " if noun[:1].lower() in "aeiou" else " a "


def crd_paths(rt: ResourceType, version: str, definition_name: str, list_name: str, status: bool,
              scale: bool) -> dict[str, Any]:
    """The paths kube-apiserver publishes for one served version of a custom resource: the collection (list,
    create, delete collection; and list across namespaces when namespaced), the item (read, replace, delete,
    patch) and the status and scale subresources when the version has them."""
    group, kind = rt.group, rt.kind
    gvk = {"group": group, "kind": kind, "version": version}
    ns = "Namespaced" if rt.namespaced else ""
    name_param = {"uniqueItems": True, "type": "string", "description": f"name of the {kind}", "name": "name",
                  "in": "path", "required": True}
    ns_param = {"uniqueItems": True, "type": "string",
                "description": "object name and auth scope, such as for teams and projects", "name": "namespace",
                "in": "path", "required": True}

    def op(verb: str, action: str, doc: str, op_name: str, returns: str, params: Iterable[str],
           body: dict[str, Any] | None = None, codes: tuple[str, ...] = ("200",)) -> dict[str, Any]:
        operation_id, tags = _operation_id(op_name, group, version)
        parameters: list[dict[str, Any]] = [body] if body else []
        parameters.extend(dict(_Q[p]) for p in params)
        texts = {"200": "OK", "201": "Created", "202": "Accepted"}
        responses: dict[str, Any] = {c: {"description": texts[c], "schema": _ref(returns)} for c in codes}
        responses["401"] = {"description": "Unauthorized"}
        out: dict[str, Any] = {
            "description": doc,
            "consumes": list(_PATCH_TYPES) if verb == "patch" else ["application/json", "application/yaml"],
            "produces": ["application/json", "application/yaml"],
            "schemes": ["https"],
            "tags": tags,
            "operationId": operation_id,
            "parameters": parameters,
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": dict(gvk),
        }
        if not parameters:
            del out["parameters"]
        return out

    def body(ref: str, required: bool = True) -> dict[str, Any]:
        return {"name": "body", "in": "body", "required": required, "schema": _ref(ref)}

    paths: dict[str, Any] = {}
    root = f"/apis/{group}/{version}/{rt.plural}"
    if rt.namespaced:
        paths[root] = {
            "get": op("get", "list", f"list objects of kind {kind}", f"list{kind}ForAllNamespaces", list_name,
                      _LIST_PARAMS),
            "parameters": [dict(_Q["pretty"])],
        }
        root = f"/apis/{group}/{version}/namespaces/{{namespace}}/{rt.plural}"
    scope = [ns_param] if rt.namespaced else []
    paths[root] = {
        "get": op("get", "list", f"list objects of kind {kind}", f"list{ns}{kind}", list_name, _LIST_PARAMS),
        "post": op("post", "post", f"create{_article(kind)}{kind}", f"create{ns}{kind}", definition_name,
                   _WRITE_PARAMS, body(definition_name), ("200", "201", "202")),
        "delete": op("delete", "deletecollection", f"delete collection of {kind}", f"deletecollection{ns}{kind}",
                     STATUS, _DELETECOLLECTION_PARAMS, body(DELETE_OPTIONS, False)),
        "parameters": [*scope, dict(_Q["pretty"])],
    }
    item_params = [name_param, *scope, dict(_Q["pretty"])]
    paths[f"{root}/{{name}}"] = {
        "get": op("get", "get", f"read the specified {kind}", f"read{ns}{kind}", definition_name, ()),
        "put": op("put", "put", f"replace the specified {kind}", f"replace{ns}{kind}", definition_name,
                  _WRITE_PARAMS, body(definition_name), ("200", "201")),
        "delete": op("delete", "delete", f"delete{_article(kind)}{kind}", f"delete{ns}{kind}", STATUS,
                     _DELETE_PARAMS, body(DELETE_OPTIONS, False), ("200", "202")),
        "patch": op("patch", "patch", f"partially update the specified {kind}", f"patch{ns}{kind}",
                    definition_name, (*_WRITE_PARAMS, "force"), body(PATCH), ("200", "201")),
        "parameters": item_params,
    }
    for sub, enabled, returns in (("status", status, definition_name), ("scale", scale, SCALE)):
        if not enabled:
            continue
        title = sub.capitalize()
        paths[f"{root}/{{name}}/{sub}"] = {
            "get": op("get", "get", f"read {sub} of the specified {kind}", f"read{ns}{kind}{title}", returns, ()),
            "put": op("put", "put", f"replace {sub} of the specified {kind}", f"replace{ns}{kind}{title}", returns,
                      _WRITE_PARAMS, body(returns), ("200", "201")),
            "patch": op("patch", "patch", f"partially update {sub} of the specified {kind}",
                        f"patch{ns}{kind}{title}", returns, (*_WRITE_PARAMS, "force"), body(PATCH), ("200", "201")),
            "parameters": list(item_params),
        }
    return paths


# ---- the document -----------------------------------------------------------------------------------------------

def definition_name(group: str, version: str, kind: str) -> str:
    """kube-apiserver's definition name of a CRD kind: the group reversed, the version, the kind
    (cache.example.com/v1alpha1 Memcached → com.example.cache.v1alpha1.Memcached)."""
    return ".".join([*reversed(group.split(".")), version, kind]) if group else f"{version}.{kind}"


def build_document(types: Iterable[ResourceType], crds: Callable[[ResourceType], dict[str, Any] | None],
                   object_meta: dict[str, Any], server_version: str) -> dict[str, Any]:
    """The Swagger 2.0 document of the served custom resources: for every served version of every CRD, its
    kind's and list kind's definitions and its paths (``crds`` gives the stored CRD of a type, for what the
    registry does not keep per version: subresources, selectable fields, list kind)."""
    definitions: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for rt in types:
        if rt.builtin:
            continue
        crd = crds(rt) or {}
        spec = crd.get("spec") or {}
        list_kind = (spec.get("names") or {}).get("listKind") or rt.list_kind
        by_name = {v.get("name"): v for v in spec.get("versions") or [] if isinstance(v, dict)}
        for version in rt.versions:
            declared = by_name.get(version)
            if declared is not None:
                subresources = declared.get("subresources") or {}
                status, scale = "status" in subresources, "scale" in subresources
                selectable = [str(f.get("jsonPath", "")).lstrip(".") for f in declared.get("selectableFields") or []
                              if isinstance(f, dict) and f.get("jsonPath")]
            else:
                status, scale, selectable = rt.status, rt.scale is not None, list(rt.field_selectors)
            name = definition_name(rt.group, version, rt.kind)
            list_name = definition_name(rt.group, version, list_kind)
            definitions[name] = kind_definition((rt.schemas or {}).get(version), rt.group, version, rt.kind,
                                                selectable)
            definitions[list_name] = list_definition(name, rt.group, version, rt.plural, rt.kind, list_kind)
            paths.update(crd_paths(rt, version, name, list_name, status, scale))
    if definitions:
        definitions.update(meta_definitions(object_meta))
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
        "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication", "type": "apiKey",
                                                "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
    }


# ---- the gnostic openapi_v2.Document protobuf encoding ----------------------------------------------------------
#
# Field numbers are those of github.com/google/gnostic openapiv2/OpenAPIv2.proto (proto3: fields holding their
# zero value are left out). Values gnostic keeps as `Any` (defaults, enums, examples, vendor extensions) carry their
# YAML text in Any.yaml (field 2); JSON text is YAML, so that is what is written.

Encoder = Callable[[int, Any], bytes]


def _varint(n: int) -> bytes:
    """A protobuf varint (a negative int64 as ten bytes)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _tag(num: int, wire: int) -> bytes:
    """A field key."""
    return _varint(num << 3 | wire)


def _bytes_field(num: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _tag(num, 2) + _varint(len(payload)) + payload


def _string(num: int, value: Any) -> bytes:
    """A string field (left out when empty)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return _bytes_field(num, text.encode()) if text else b""


def _bool(num: int, value: Any) -> bytes:
    """A bool field (left out when false)."""
    return _tag(num, 0) + b"\x01" if value is True else b""


def _double(num: int, value: Any) -> bytes:
    """A double field (left out when zero)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
        return b""
    return _tag(num, 1) + struct.pack("<d", float(value))


def _int64(num: int, value: Any) -> bytes:
    """An int64 field (left out when zero)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) == 0:
        return b""
    return _tag(num, 0) + _varint(int(value))


def _strings(num: int, value: Any) -> bytes:
    """A repeated string field."""
    values = value if isinstance(value, list) else [value]
    return b"".join(_bytes_field(num, (v if isinstance(v, str) else json.dumps(v)).encode()) for v in values)


def _yaml_text(value: Any) -> str:
    """The YAML text gnostic keeps for an Any value."""
    # JSON with ", " and ": " separators reads the same as YAML 1.1 and 1.2 (the form gnostic's readers parse)
    return json.dumps(value, ensure_ascii=False)


def _any(num: int, value: Any) -> bytes:
    """An Any field holding ``value`` as YAML text."""
    return _bytes_field(num, _string(2, _yaml_text(value)))


def _anys(num: int, value: Any) -> bytes:
    """A repeated Any field."""
    return b"".join(_any(num, v) for v in (value if isinstance(value, list) else [value]))


class _Message:
    """An encoder of a JSON object as the message whose JSON keys map to ``fields`` (number, encoder); ``x-`` keys
    become its repeated NamedAny vendor extensions (field ``vendor``) when it has them. Unknown keys are left out."""

    def __init__(self, fields: dict[str, tuple[int, Encoder]], vendor: int | None = None) -> None:
        self.fields = fields
        self.vendor = vendor

    def __call__(self, num: int, value: Any) -> bytes:
        """The message as field ``num`` of its parent."""
        return _bytes_field(num, self.body(value)) if isinstance(value, dict) else b""

    def body(self, value: dict[str, Any]) -> bytes:
        """The message's own bytes, fields in number order, vendor extensions last."""
        parts: list[tuple[int, bytes]] = []
        extensions = b""
        for key, v in value.items():
            spec = self.fields.get(key)
            if spec is not None:
                parts.append((spec[0], spec[1](spec[0], v)))
            elif self.vendor is not None and key.startswith("x-"):
                extensions += _bytes_field(self.vendor, _string(1, key) + _any(2, v))
        parts.sort(key=lambda p: p[0])
        return b"".join(p for _, p in parts) + extensions


def _named(value_encoder: Encoder) -> Encoder:
    """A JSON object as repeated Named* entries (name = 1, value = 2), each at field ``num``."""
    def encode(num: int, value: Any) -> bytes:
        if not isinstance(value, dict):
            return b""
        return b"".join(_bytes_field(num, _string(1, k) + value_encoder(2, v)) for k, v in value.items())
    return encode


def _wrapped(inner_num: int, inner: Encoder) -> Encoder:
    """A message whose only content is ``inner`` at field ``inner_num`` (Definitions, Properties, ...)."""
    def encode(num: int, value: Any) -> bytes:
        return _bytes_field(num, inner(inner_num, value))
    return encode


def _schema_encoder() -> Encoder:
    """The encoder of a Schema message (recursive: properties, items, allOf, additionalProperties)."""
    fields: dict[str, tuple[int, Encoder]] = {}
    schema = _Message(fields, vendor=31)

    def additional_properties(num: int, value: Any) -> bytes:  # AdditionalPropertiesItem: schema 1 | boolean 2
        if isinstance(value, bool):
            return _bytes_field(num, _tag(2, 0) + (b"\x01" if value else b"\x00"))
        return _bytes_field(num, schema(1, value))

    def type_item(num: int, value: Any) -> bytes:  # TypeItem: repeated string value = 1
        return _bytes_field(num, _strings(1, value))

    def items_item(num: int, value: Any) -> bytes:  # ItemsItem: repeated Schema schema = 1
        return _bytes_field(num, b"".join(schema(1, v) for v in (value if isinstance(value, list) else [value])))

    def all_of(num: int, value: Any) -> bytes:
        return b"".join(schema(num, v) for v in value) if isinstance(value, list) else b""

    fields.update({
        "$ref": (1, _string), "format": (2, _string), "title": (3, _string), "description": (4, _string),
        "default": (5, _any), "multipleOf": (6, _double), "maximum": (7, _double), "exclusiveMaximum": (8, _bool),
        "minimum": (9, _double), "exclusiveMinimum": (10, _bool), "maxLength": (11, _int64),
        "minLength": (12, _int64), "pattern": (13, _string), "maxItems": (14, _int64), "minItems": (15, _int64),
        "uniqueItems": (16, _bool), "maxProperties": (17, _int64), "minProperties": (18, _int64),
        "required": (19, _strings), "enum": (20, _anys), "additionalProperties": (21, additional_properties),
        "type": (22, type_item), "items": (23, items_item), "allOf": (24, all_of),
        "properties": (25, _wrapped(1, _named(schema))), "discriminator": (26, _string),
        "readOnly": (27, _bool), "example": (30, _any),
    })
    return schema


_SCHEMA = _schema_encoder()
_PRIMITIVES: Encoder = _Message({})  # PrimitivesItems: unused by kubesim's parameters


def _sub_schema(first: dict[str, int], rest_from: int) -> Encoder:
    """The Header/FormData/Query/Path parameter sub-schemas: ``first`` fields, then the shared run of validation
    fields numbered from ``rest_from``."""
    names = ["type", "format", "items", "collectionFormat", "default", "maximum", "exclusiveMaximum", "minimum",
             "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "enum",
             "multipleOf"]
    kinds: dict[str, Encoder] = {"type": _string, "format": _string, "items": _PRIMITIVES,
                                 "collectionFormat": _string, "default": _any, "maximum": _double,
                                 "exclusiveMaximum": _bool, "minimum": _double, "exclusiveMinimum": _bool,
                                 "maxLength": _int64, "minLength": _int64, "pattern": _string, "maxItems": _int64,
                                 "minItems": _int64, "uniqueItems": _bool, "enum": _anys, "multipleOf": _double}
    first_kinds: dict[str, Encoder] = {"required": _bool, "in": _string, "description": _string, "name": _string,
                                       "allowEmptyValue": _bool}
    fields = {k: (n, first_kinds[k]) for k, n in first.items()}
    fields.update({k: (rest_from + i, kinds[k]) for i, k in enumerate(names)})
    return _Message(fields, vendor=rest_from + len(names))


_HEAD = {"required": 1, "in": 2, "description": 3, "name": 4}
_QUERY_PARAM = _sub_schema({**_HEAD, "allowEmptyValue": 5}, 6)    # QueryParameterSubSchema, FormData alike
_PATH_PARAM = _sub_schema(_HEAD, 5)                                # PathParameterSubSchema, Header alike
_BODY_PARAM = _Message({"description": (1, _string), "name": (2, _string), "in": (3, _string),
                        "required": (4, _bool), "schema": (5, _SCHEMA)}, vendor=6)
_JSON_REFERENCE = _Message({"$ref": (1, _string), "description": (2, _string)})


def _parameters_item(num: int, value: Any) -> bytes:
    """ParametersItem: parameter 1 (Parameter: body 1 | non-body 2 (header 1, formData 2, query 3, path 4)) or
    json_reference 2."""
    if not isinstance(value, dict):
        return b""
    if "$ref" in value:
        return _bytes_field(num, _JSON_REFERENCE(2, value))
    where = value.get("in")
    if where == "body":
        parameter = _BODY_PARAM(1, value)
    else:
        slot, encoder = {"header": (1, _PATH_PARAM), "formData": (2, _QUERY_PARAM), "query": (3, _QUERY_PARAM),
                         "path": (4, _PATH_PARAM)}.get(str(where), (3, _QUERY_PARAM))
        parameter = _bytes_field(2, encoder(slot, value))
    return _bytes_field(num, _bytes_field(1, parameter))


def _repeated(encoder: Encoder) -> Encoder:
    """Each element of a JSON list as a repeated field."""
    def encode(num: int, value: Any) -> bytes:
        return b"".join(encoder(num, v) for v in value) if isinstance(value, list) else b""
    return encode


_RESPONSE = _Message({"description": (1, _string), "schema": (2, _wrapped(1, _SCHEMA))}, vendor=5)


def _response_value(num: int, value: Any) -> bytes:
    """ResponseValue: response 1 | json_reference 2."""
    if isinstance(value, dict) and "$ref" in value:
        return _bytes_field(num, _JSON_REFERENCE(2, value))
    return _bytes_field(num, _RESPONSE(1, value))


def _responses(num: int, value: Any) -> bytes:
    """Responses: repeated NamedResponseValue response_code = 1, vendor extensions = 2."""
    if not isinstance(value, dict):
        return b""
    codes = {k: v for k, v in value.items() if not k.startswith("x-")}
    extensions = b"".join(_bytes_field(2, _string(1, k) + _any(2, v)) for k, v in value.items() if k.startswith("x-"))
    return _bytes_field(num, _named(_response_value)(1, codes) + extensions)


_OPERATION = _Message({
    "tags": (1, _strings), "summary": (2, _string), "description": (3, _string), "operationId": (5, _string),
    "produces": (6, _strings), "consumes": (7, _strings), "parameters": (8, _repeated(_parameters_item)),
    "responses": (9, _responses), "schemes": (10, _strings), "deprecated": (11, _bool),
}, vendor=13)
_PATH_ITEM = _Message({
    "$ref": (1, _string), "get": (2, _OPERATION), "put": (3, _OPERATION), "post": (4, _OPERATION),
    "delete": (5, _OPERATION), "options": (6, _OPERATION), "head": (7, _OPERATION), "patch": (8, _OPERATION),
    "parameters": (9, _repeated(_parameters_item)),
}, vendor=10)


def _paths(num: int, value: Any) -> bytes:
    """Paths: vendor extensions 1, repeated NamedPathItem path = 2."""
    if not isinstance(value, dict):
        return b""
    items = {k: v for k, v in value.items() if not k.startswith("x-")}
    extensions = b"".join(_bytes_field(1, _string(1, k) + _any(2, v)) for k, v in value.items() if k.startswith("x-"))
    return _bytes_field(num, extensions + _named(_PATH_ITEM)(2, items))


_API_KEY = _Message({"type": (1, _string), "name": (2, _string), "in": (3, _string), "description": (4, _string)},
                    vendor=5)


def _security_definitions_item(num: int, value: Any) -> bytes:
    """SecurityDefinitionsItem: only api_key_security (2) is written; kube-apiserver publishes no other."""
    if isinstance(value, dict) and value.get("type") == "apiKey":
        return _bytes_field(num, _API_KEY(2, value))
    return _bytes_field(num, b"")


def _security_requirement(num: int, value: Any) -> bytes:
    """SecurityRequirement: repeated NamedStringArray (StringArray: repeated string value = 1)."""
    return _bytes_field(num, _named(_wrapped(1, _strings))(1, value))


_DOCUMENT = _Message({
    "swagger": (1, _string), "info": (2, _Message({"title": (1, _string), "version": (2, _string),
                                                    "description": (3, _string)}, vendor=7)),
    "host": (3, _string), "basePath": (4, _string), "schemes": (5, _strings), "consumes": (6, _strings),
    "produces": (7, _strings), "paths": (8, _paths), "definitions": (9, _wrapped(1, _named(_SCHEMA))),
    "security": (12, _repeated(_security_requirement)),
    "securityDefinitions": (13, _wrapped(1, _named(_security_definitions_item))),
}, vendor=16)


def encode_document(document: dict[str, Any]) -> bytes:
    """``document`` (a Swagger 2.0 document as :func:`build_document` writes it) as the bytes of a gnostic
    ``openapi_v2.Document`` message, what kube-apiserver answers to ``Accept:
    application/com.github.proto-openapi.spec.v2@v1.0+protobuf``."""
    return _DOCUMENT.body(document)
