"""A kind's CustomResourceDefinition, generated from what the Reconciler class declares (never written by hand).

- names and scope from `resource` (plural, kind, group, version, namespaced) and `short_names`, `categories`;
- `spec` from `spec_model`, converted to a *structural* openAPIV3Schema as kube-apiserver requires it: `$ref`s
  inlined, `Optional[X]` → `nullable`, `int | str` → `x-kubernetes-int-or-string`, `dict[str, X]` →
  `additionalProperties`, `Any` / an untyped dict → `x-kubernetes-preserve-unknown-fields`, JSON Schema's
  numeric `exclusiveMinimum` → OpenAPI v3.0's boolean form, `set[X]` → `x-kubernetes-list-type: set`; titles
  and what OpenAPI v3.0 does not know are dropped; other unions are refused with an error naming the field;
- `status`: `phase` as an enum of the state machine's states, `reason`, `message`, `observedGeneration`,
  `lastHandledReconcileAt` and the standard conditions block (the engine writes them), plus `status_model`;
- the status subresource always, the scale subresource when declared, and printer columns: Phase, the kind's
  own, Reason (-o wide) and Age.

`crd_manifest(reconciler)` returns the object; `crd_yaml(reconciler)` the file `manage.py crds` writes.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import yaml

from reconcilers.core.kind import PrinterColumn
from reconcilers.core.reconciler import Reconciler

#: the formats kube-apiserver validates (others are accepted but meaningless, so they are dropped)
FORMATS = {"int32", "int64", "float", "double", "byte", "date", "date-time", "password", "uuid", "email",
           "hostname", "ipv4", "ipv6", "cidr", "mac", "uri", "isbn", "uuid3", "uuid4", "uuid5", "duration"}
#: the keywords a structural schema keeps as they are
_KEPT = ("description", "default", "minimum", "maximum", "multipleOf", "minLength", "maxLength", "pattern",
         "minItems", "maxItems", "minProperties", "maxProperties", "enum", "nullable", "example")
ENGINE_STATUS_FIELDS = ("phase", "reason", "message", "observedGeneration", "lastHandledReconcileAt", "conditions")

CONDITIONS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Conditions of the object, following metav1.Condition (kstatus Ready, Reconciling, Stalled and "
                   "the kind's own).",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1,
                       "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
            "message": {"type": "string", "maxLength": 32768},
        },
    },
}


class SchemaError(ValueError):
    """A model that cannot become a structural schema (the message names the field and what to do)."""


def _kind_class(reconciler: Reconciler | type[Reconciler]) -> type[Reconciler]:
    return reconciler if inspect.isclass(reconciler) else type(reconciler)


def structural_schema(model: Any, *, root: str = "spec") -> dict[str, Any]:
    """The structural openAPIV3Schema of a pydantic model (see the module docstring). SchemaError names the field
    of anything that has no structural form."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _convert(raw, defs, root, ())


def _resolve(ref: str, defs: dict[str, Any], where: str, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    name = ref.rsplit("/", 1)[-1]
    if name in seen:
        raise SchemaError(f"{where}: {name} refers to itself; a CRD schema cannot be recursive "
                          "(use Any, which keeps unknown fields)")
    return defs[name], name


def _convert(node: dict[str, Any], defs: dict[str, Any], where: str, seen: tuple[str, ...]) -> dict[str, Any]:
    node = dict(node)
    if "$ref" in node:
        target, name = _resolve(node.pop("$ref"), defs, where, seen)
        merged = {**target, **{k: v for k, v in node.items() if k != "title"}}
        return _convert(merged, defs, where, (*seen, name))
    if "allOf" in node and len(node["allOf"]) == 1:
        inner = node.pop("allOf")[0]
        return _convert({**inner, **node}, defs, where, seen)
    for union in ("anyOf", "oneOf"):
        if union in node:
            return _union(node, union, defs, where, seen)
    if "const" in node:
        node.setdefault("enum", [node.pop("const")])
    out: dict[str, Any] = {}
    kind = node.get("type")
    if kind is not None:
        if not isinstance(kind, str):
            raise SchemaError(f"{where}: a field of several types ({kind}) has no structural schema")
        out["type"] = kind
    for key in _KEPT:
        if key in node and not (key == "default" and node[key] is None):  # a null default is no default
            out[key] = copy.deepcopy(node[key])
    if "examples" in node and node["examples"]:
        out.setdefault("example", node["examples"][0])
    if node.get("format") in FORMATS:
        out["format"] = node["format"]
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and not isinstance(node[bound], bool):
            out[flag] = node[bound]
            out[bound] = True
    out.update({k: copy.deepcopy(v) for k, v in node.items() if k.startswith("x-kubernetes-")})
    if kind == "object":
        _object(node, out, defs, where, seen)
    elif kind == "array":
        if "items" not in node:
            raise SchemaError(f"{where}: a list needs an item type (list[str], list[Model], ...)")
        out["items"] = _convert(node["items"], defs, f"{where}[]", seen)
        if node.get("uniqueItems"):
            out.setdefault("x-kubernetes-list-type", "set")
    elif kind is None and "enum" not in out and not out.get("x-kubernetes-int-or-string"):
        out["x-kubernetes-preserve-unknown-fields"] = True  # Any: whatever the object holds is kept
    if kind is None and "enum" in out:
        out["type"] = _enum_type(out["enum"], where)
    return out


def _object(node: dict[str, Any], out: dict[str, Any], defs: dict[str, Any], where: str,
            seen: tuple[str, ...]) -> None:
    properties = node.get("properties")
    extra = node.get("additionalProperties")
    if properties:
        out["properties"] = {name: _convert(sub, defs, f"{where}.{name}", seen) for name, sub in properties.items()}
        if node.get("required"):
            out["required"] = list(node["required"])
    elif isinstance(extra, dict) and extra:
        out["additionalProperties"] = _convert(extra, defs, f"{where}.*", seen)
    elif extra is not False:
        out["x-kubernetes-preserve-unknown-fields"] = True  # dict / dict[str, Any]: keep what it holds


def _union(node: dict[str, Any], union: str, defs: dict[str, Any], where: str, seen: tuple[str, ...]) -> dict[str, Any]:
    options = [o for o in node[union] if o.get("type") != "null"]
    nullable = len(options) < len(node[union])
    rest = {k: v for k, v in node.items() if k not in (union, "title")}
    if len(options) == 1:
        out = _convert({**options[0], **rest}, defs, where, seen)
    elif sorted(o.get("type", "") for o in options) == ["integer", "string"]:
        out = _convert(rest, defs, where, seen)
        out.pop("x-kubernetes-preserve-unknown-fields", None)
        out["x-kubernetes-int-or-string"] = True
    else:
        kinds = ", ".join(str(o.get("type") or o.get("$ref", "?").rsplit("/", 1)[-1]) for o in options)
        raise SchemaError(f"{where}: a union of {kinds} has no structural schema; use one type, int | str, "
                          "or Any (which keeps unknown fields)")
    if nullable:
        out["nullable"] = True
    return out


def _enum_type(values: list[Any], where: str) -> str:
    kinds = {type(v) for v in values}
    if kinds <= {str}:
        return "string"
    if kinds <= {int}:
        return "integer"
    if kinds <= {int, float}:
        return "number"
    if kinds <= {bool}:
        return "boolean"
    raise SchemaError(f"{where}: an enum mixing {sorted(k.__name__ for k in kinds)} has no structural schema")


_KIND_MODEL = object()  # spec_schema's default: the kind's own spec model


def status_schema(reconciler: Reconciler | type[Reconciler]) -> dict[str, Any]:
    """The status schema: the engine's fields (phase enum from the state machine, conditions) and the kind's."""
    cls = _kind_class(reconciler)
    properties: dict[str, Any] = {
        "phase": {"type": "string", "enum": list(cls.state_machine.states),
                  "description": f"Where the {cls.resource.kind} stands in its state machine."},
        "reason": {"type": "string", "description": "Why it is in this phase (CamelCase)."},
        "message": {"type": "string", "description": "What the last reconcile said, for people."},
        "observedGeneration": {"type": "integer", "format": "int64",
                               "description": "The metadata.generation the last reconcile handled."},
        "lastHandledReconcileAt": {"type": "string",
                                   "description": "The reconcile-requested-at token the last manual run handled."},
        "conditions": copy.deepcopy(CONDITIONS_SCHEMA),
    }
    out: dict[str, Any] = {"type": "object", "description": f"The observed state of the {cls.resource.kind}."}
    if cls.status_model is None:
        out["x-kubernetes-preserve-unknown-fields"] = True
    else:
        own = structural_schema(cls.status_model, root="status")
        for name, sub in (own.get("properties") or {}).items():
            if name in ENGINE_STATUS_FIELDS:
                raise SchemaError(f"status.{name}: the engine owns this field; the status model may not declare it")
            properties[name] = sub
        if own.get("x-kubernetes-preserve-unknown-fields"):
            out["x-kubernetes-preserve-unknown-fields"] = True
    out["properties"] = properties
    return out


def spec_schema(reconciler: Reconciler | type[Reconciler], model: Any = _KIND_MODEL) -> dict[str, Any]:
    """The spec schema: the spec model's (the kind's, or `model`, another version's), or any object without one."""
    cls = _kind_class(reconciler)
    model = cls.spec_model if model is _KIND_MODEL else model
    if model is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = structural_schema(model)
    schema["type"] = "object"
    return schema


def printer_columns(reconciler: Reconciler | type[Reconciler],
                    own: tuple[PrinterColumn, ...] | None = None) -> list[dict[str, Any]]:
    """Phase, the kind's columns (or `own`, a version's), Reason (-o wide), Age."""
    cls = _kind_class(reconciler)
    columns = [
        PrinterColumn("Phase", ".status.phase"),
        *(cls.printer_columns if own is None else own),
        PrinterColumn("Reason", ".status.reason", priority=1),
        PrinterColumn("Age", ".metadata.creationTimestamp", type="date"),
    ]
    return [c.manifest() for c in columns]


def crd_name(reconciler: Reconciler | type[Reconciler]) -> str:
    """`<plural>.<group>`, the CRD's metadata.name."""
    res = _kind_class(reconciler).resource
    return f"{res.plural}.{res.group}"


def crd_manifest(reconciler: Reconciler | type[Reconciler]) -> dict[str, Any]:
    """The kind's CustomResourceDefinition (apiextensions.k8s.io/v1). SchemaError when a model has no structural
    form, ValueError when the kind's naming is not one Kubernetes accepts."""
    cls = _kind_class(reconciler)
    res = cls.resource
    if not res.group or "." not in res.group:
        raise ValueError(f"{cls.__name__}: a custom resource needs a DNS-style API group (e.g. example.com), "
                         f"not {res.group!r}")
    description = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].replace("\n", " ")
    root: dict[str, Any] = {"type": "object"}
    if description:
        root["description"] = description
    root["properties"] = {"spec": spec_schema(cls), "status": status_schema(cls)}
    subresources: dict[str, Any] = {"status": {}}
    if cls.scale is not None:
        subresources["scale"] = cls.scale.manifest()
    names: dict[str, Any] = {"plural": res.plural, "singular": res.kind.lower(), "kind": res.kind,
                             "listKind": f"{res.kind}List"}
    if cls.short_names:
        names["shortNames"] = list(cls.short_names)
    if cls.categories:
        names["categories"] = list(cls.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(cls), "labels": {"app.kubernetes.io/managed-by": "opsconsole"}},
        "spec": {
            "group": res.group,
            "scope": "Namespaced" if res.namespaced else "Cluster",
            "names": names,
            "versions": [{
                "name": res.version,
                "served": True,
                "storage": True,
                "subresources": subresources,
                "additionalPrinterColumns": printer_columns(cls),
                "schema": {"openAPIV3Schema": root},
            }, *(_other_version(cls, version, root, subresources) for version in cls.versions)],
            **({"conversion": conversion_webhook(cls)} if cls.versions else {}),
        },
    }


#: where the generated CRDs send ConversionReviews (deploy/kustomize's Service; `runwebhooks --install` writes a URL and
#: the CA into the CRD in the sandbox)
CONVERSION_SERVICE = {"namespace": "opsconsole", "name": "opsconsole-webhooks", "port": 443}


def conversion_webhook(cls: type[Reconciler]) -> dict[str, Any]:
    """`spec.conversion` of a kind with several versions: by webhook, at `/convert/<group>/<plural>`."""
    return {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"service": {
        **CONVERSION_SERVICE, "path": f"/convert/{cls.resource.group}/{cls.resource.plural}"}}}}


def _other_version(cls: type[Reconciler], version: Any, root: dict[str, Any],
                   subresources: dict[str, Any]) -> dict[str, Any]:
    other_root = copy.deepcopy(root)
    other_root["properties"]["spec"] = spec_schema(cls, version.spec_model)
    entry: dict[str, Any] = {"name": version.name, "served": True, "storage": False, "subresources": subresources,
                             "additionalPrinterColumns": printer_columns(cls, version.printer_columns),
                             "schema": {"openAPIV3Schema": other_root}}
    if version.deprecated:
        entry["deprecated"] = True
    return entry


class _Dumper(yaml.SafeDumper):
    """Block style, keys in the order given, long strings kept on one line."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def crd_yaml(reconciler: Reconciler | type[Reconciler]) -> str:
    """The CRD as the YAML file `manage.py crds --write` writes (a header says where it comes from)."""
    cls = _kind_class(reconciler)
    header = (f"# Generated by `manage.py crds` from {cls.__module__}.{cls.__qualname__}: do not edit.\n"
              f"# Change the kind's models or declarations and run `manage.py crds --write <dir>` again.\n")
    body = yaml.dump(crd_manifest(cls), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000,
                     allow_unicode=True)
    return header + body
