"""Structural openAPIV3Schema handling for custom resources: defaulting, pruning and validation.

Mirrors the apiextensions-apiserver: defaults are applied first, unknown fields are pruned (unless
``x-kubernetes-preserve-unknown-fields``), then values are validated and each failure becomes a
``details.causes`` entry naming its field path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kubesim.errors import cause
from kubesim.meta import clone

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _show(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"))


@dataclass
class SchemaResult:
    """The processed object, the validation causes and the paths of pruned unknown fields."""

    value: Any
    causes: list[dict[str, str]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def process(obj: dict[str, Any], schema: dict[str, Any] | None) -> SchemaResult:
    """Default, prune and validate a custom object against its version's openAPIV3Schema."""
    result = SchemaResult(value=obj)
    if not schema:
        return result
    out = clone(obj)
    props = schema.get("properties") or {}
    for key in list(out):
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key in props:
            continue
        if not (schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("additionalProperties")):
            result.unknown.append(key)
            del out[key]
    for key, sub in props.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        _default_into(out, key, sub)
        if key in out:
            out[key] = _walk(out[key], sub, key, result)
    for req in schema.get("required") or []:
        if req not in out:
            result.causes.append(cause(req, "FieldValueRequired", "Required value"))
    result.value = out
    return result


def _default_into(parent: dict[str, Any], key: str, sub: dict[str, Any]) -> None:
    if "default" not in sub:
        return
    if key not in parent or (parent[key] is None and not sub.get("nullable")):
        parent[key] = clone(sub["default"])


def _walk(value: Any, schema: dict[str, Any], path: str, res: SchemaResult) -> Any:
    if value is None:
        if schema.get("nullable"):
            return None
        if schema.get("type"):
            res.causes.append(cause(path, "FieldValueTypeInvalid",
                                    f'Invalid value: "null": {path} in body must be of type {schema["type"]}: "null"'))
        return value
    typ = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _TYPES["integer"](value)):
            res.causes.append(cause(path, "FieldValueTypeInvalid",
                                    f'Invalid value: "{_type_name(value)}": {path} in body must be of type '
                                    f'integer or string: "{_type_name(value)}"'))
            return value
    elif typ and typ in _TYPES and not _TYPES[typ](value):
        res.causes.append(cause(path, "FieldValueTypeInvalid",
                                f'Invalid value: "{_type_name(value)}": {path} in body must be of type {typ}: '
                                f'"{_type_name(value)}"'))
        return value
    if isinstance(value, dict):
        value = _walk_object(value, schema, path, res)
    elif isinstance(value, list):
        value = _walk_array(value, schema, path, res)
    _check_scalar(value, schema, path, res)
    return value


def _walk_object(value: dict[str, Any], schema: dict[str, Any], path: str, res: SchemaResult) -> dict[str, Any]:
    props = schema.get("properties")
    addl = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    embedded = schema.get("x-kubernetes-embedded-resource")
    out = dict(value)
    if props is not None or addl is not None or not preserve:
        for key in list(out):
            if props and key in props:
                continue
            if embedded and key in ("apiVersion", "kind", "metadata"):
                continue
            if isinstance(addl, dict):
                out[key] = _walk(out[key], addl, f"{path}.{key}", res)
                continue
            if addl is True or preserve:
                continue
            res.unknown.append(f"{path}.{key}")
            del out[key]
    for key, sub in (props or {}).items():
        _default_into(out, key, sub)
        if key in out:
            out[key] = _walk(out[key], sub, f"{path}.{key}", res)
    for req in schema.get("required") or []:
        if req not in out:
            res.causes.append(cause(f"{path}.{req}", "FieldValueRequired", "Required value"))
    if "maxProperties" in schema and len(out) > schema["maxProperties"]:
        res.causes.append(cause(path, "FieldValueTooMany",
                                f"Too many: {len(out)}: must have at most {schema['maxProperties']} items"))
    if "minProperties" in schema and len(out) < schema["minProperties"]:
        res.causes.append(cause(path, "FieldValueInvalid",
                                f"Invalid value: {len(out)}: {path} in body should have at least "
                                f"{schema['minProperties']} properties"))
    return out


def _walk_array(value: list[Any], schema: dict[str, Any], path: str, res: SchemaResult) -> list[Any]:
    items = schema.get("items")
    out = list(value)
    if isinstance(items, dict):
        for i, item in enumerate(out):
            out[i] = _walk(item, items, f"{path}[{i}]", res)
    if "maxItems" in schema and len(out) > schema["maxItems"]:
        res.causes.append(cause(path, "FieldValueTooMany",
                                f"Too many: {len(out)}: must have at most {schema['maxItems']} items"))
    if "minItems" in schema and len(out) < schema["minItems"]:
        res.causes.append(cause(path, "FieldValueInvalid",
                                f"Invalid value: {len(out)}: {path} in body should have at least "
                                f"{schema['minItems']} items"))
    if schema.get("uniqueItems") or schema.get("x-kubernetes-list-type") == "set":
        seen: list[Any] = []
        for i, item in enumerate(out):
            if item in seen:
                res.causes.append(cause(f"{path}[{i}]", "FieldValueDuplicate", f"Duplicate value: {_show(item)}"))
            seen.append(item)
    return out


def _check_scalar(value: Any, schema: dict[str, Any], path: str, res: SchemaResult) -> None:
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        allowed = ", ".join(_show(e) for e in enum)
        res.causes.append(cause(path, "FieldValueNotSupported",
                                f"Unsupported value: {_show(value)}: supported values: {allowed}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            res.causes.append(cause(path, "FieldValueTooLong", f"Too long: may not be more than "
                                    f"{schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            res.causes.append(cause(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {path} in body "
                                    f"should be at least {schema['minLength']} chars long"))
        pattern = schema.get("pattern")
        if pattern is not None and not re.search(pattern, value):
            res.causes.append(cause(path, "FieldValueInvalid",
                                    f"Invalid value: {_show(value)}: {path} in body should match '{pattern}'"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if minimum is not None:
            if schema.get("exclusiveMinimum") and value <= minimum:
                res.causes.append(cause(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {path} in body "
                                        f"should be greater than {minimum}"))
            elif value < minimum:
                res.causes.append(cause(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {path} in body "
                                        f"should be greater than or equal to {minimum}"))
        if maximum is not None:
            if schema.get("exclusiveMaximum") and value >= maximum:
                res.causes.append(cause(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {path} in body "
                                        f"should be less than {maximum}"))
            elif value > maximum:
                res.causes.append(cause(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {path} in body "
                                        f"should be less than or equal to {maximum}"))
        multiple = schema.get("multipleOf")
        if multiple and value % multiple != 0:
            res.causes.append(cause(path, "FieldValueInvalid", f"Invalid value: {_show(value)}: {path} in body "
                                    f"should be a multiple of {multiple}"))
