"""Decoding the Kubernetes protobuf envelope for the few kinds typed ``kubectl create`` commands send.

client-go's typed clients (``kubectl create namespace|configmap|secret|serviceaccount``) send
``application/vnd.kubernetes.protobuf``. This decodes those kinds' wire format into their JSON form;
anything else is answered 415 by the caller.
"""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"


class ProtobufUnsupported(ValueError):
    """A body this decoder cannot turn into JSON."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufUnsupported("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ProtobufUnsupported(f"wire type {wire}")
        out.append((num, wire, value))
    return out


# schema: field number -> (json name, type); type is "str", "bytes", "int", "bool", "map_ss", "map_sb",
# a nested schema dict, or a list [type] for repeated fields
OWNER_REF = {1: ("kind", "str"), 3: ("name", "str"), 4: ("uid", "str"), 5: ("apiVersion", "str"),
             6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
OBJECT_META = {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"), 5: ("uid", "str"),
               6: ("resourceVersion", "str"), 7: ("generation", "int"), 11: ("labels", "map_ss"),
               12: ("annotations", "map_ss"), 13: ("ownerReferences", [OWNER_REF]), 14: ("finalizers", ["str"])}
OBJECT_REF = {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"), 4: ("uid", "str"),
              5: ("apiVersion", "str"), 6: ("resourceVersion", "str"), 7: ("fieldPath", "str")}
KINDS: dict[tuple[str, str], dict[int, tuple[str, Any]]] = {
    ("v1", "Namespace"): {1: ("metadata", OBJECT_META), 2: ("spec", {1: ("finalizers", ["str"])}),
                          3: ("status", {1: ("phase", "str")})},
    ("v1", "ConfigMap"): {1: ("metadata", OBJECT_META), 2: ("data", "map_ss"), 3: ("binaryData", "map_sb"),
                          4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", OBJECT_META), 2: ("data", "map_sb"), 3: ("type", "str"),
                       4: ("stringData", "map_ss"), 5: ("immutable", "bool")},
    ("v1", "ServiceAccount"): {1: ("metadata", OBJECT_META), 2: ("secrets", [OBJECT_REF]),
                               3: ("imagePullSecrets", [{1: ("name", "str")}]),
                               4: ("automountServiceAccountToken", "bool")},
}
# authorization.k8s.io/v1 (k8s.io/api/authorization/v1/generated.proto): what `kubectl auth can-i` sends
RESOURCE_ATTRIBUTES = {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"), 4: ("version", "str"),
                       5: ("resource", "str"), 6: ("subresource", "str"), 7: ("name", "str")}
NON_RESOURCE_ATTRIBUTES = {1: ("path", "str"), 2: ("verb", "str")}
ACCESS_SPEC = {1: ("resourceAttributes", RESOURCE_ATTRIBUTES), 2: ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)}
KINDS[("authorization.k8s.io/v1", "SelfSubjectAccessReview")] = {1: ("metadata", OBJECT_META), 2: ("spec", ACCESS_SPEC)}
KINDS[("authorization.k8s.io/v1", "SubjectAccessReview")] = {1: ("metadata", OBJECT_META), 2: ("spec", {
    **ACCESS_SPEC, 3: ("user", "str"), 4: ("groups", ["str"]), 6: ("uid", "str")})}
KINDS[("authorization.k8s.io/v1", "SelfSubjectRulesReview")] = {1: ("metadata", OBJECT_META),
                                                                 2: ("spec", {1: ("namespace", "str")})}
# authentication.k8s.io/v1 TokenRequest (k8s.io/api/authentication/v1/generated.proto): `kubectl create token`
KINDS[("authentication.k8s.io/v1", "TokenRequest")] = {1: ("metadata", OBJECT_META), 2: ("spec", {
    1: ("audiences", ["str"]), 4: ("expirationSeconds", "int")})}


def _value(kind: Any, wire: int, raw: Any) -> Any:
    if kind == "str":
        return bytes(raw).decode()
    if kind == "bytes":
        return base64.b64encode(bytes(raw)).decode()
    if kind == "int":
        return raw if raw < (1 << 63) else raw - (1 << 64)
    if kind == "bool":
        return bool(raw)
    if isinstance(kind, dict):
        return _message(bytes(raw), kind)
    raise ProtobufUnsupported(f"field type {kind}")


def _message(buf: bytes, schema: dict[int, tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for num, wire, raw in _fields(buf):
        if num not in schema:
            continue
        name, kind = schema[num]
        if kind in ("map_ss", "map_sb"):
            entry = {n: v for n, _, v in _fields(bytes(raw))}
            key = bytes(entry.get(1, b"")).decode()
            value = bytes(entry.get(2, b""))
            out.setdefault(name, {})[key] = value.decode() if kind == "map_ss" else base64.b64encode(value).decode()
        elif isinstance(kind, list):
            out.setdefault(name, []).append(_value(kind[0], wire, raw))
        else:
            out[name] = _value(kind, wire, raw)
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object; ProtobufUnsupported for kinds not covered."""
    if not body.startswith(MAGIC):
        raise ProtobufUnsupported("missing the k8s protobuf magic")
    unknown = {n: v for n, _, v in _fields(body[len(MAGIC):])}
    type_meta = {n: bytes(v).decode() for n, _, v in _fields(bytes(unknown.get(1, b"")))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufUnsupported(f"protobuf bodies of {api_version}/{kind} are not supported")
    obj = _message(bytes(unknown.get(2, b"")), schema)
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj
