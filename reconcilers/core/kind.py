"""Typed kinds: the pydantic base for a kind's spec and status models, and what else a kind declares for its CRD.

A kind declares its spec as a `KindModel` (pydantic v2): field names are written in Python style and appear in
the object in Kubernetes style (`progress_deadline_seconds` ↔ `progressDeadlineSeconds`); constraints,
defaults, enums and descriptions (pydantic `Field`, `Annotated`, attribute docstrings) become both the
engine's validation of the live object and the generated CRD's schema (`reconcilers.core.crd`).
`x-kubernetes-*` extensions go in `Field(json_schema_extra={...})`.

`validate_spec(model, obj)` is what the reconcile step runs before `reconcile()`: the typed spec, or a
`PermanentError` (reason `InvalidSpec`) naming each bad field, e.g.
`spec.size: must be at most 100 (got 200); spec.image: a string is required (got 5)`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from reconcilers.core.types import PermanentError

INVALID_SPEC = "InvalidSpec"


class KindModel(BaseModel):
    """Base of a kind's spec and status models: camelCase in the object, attribute docstrings as descriptions,
    unknown fields ignored (the API server prunes them from a structural schema anyway), and types checked as
    the API server checks them (strict: "3" is not an integer, true is not a number)."""

    model_config = ConfigDict(
        strict=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        use_attribute_docstrings=True,
        extra="ignore",
    )


ColumnType = Literal["string", "integer", "number", "boolean", "date"]


@dataclass(frozen=True)
class PrinterColumn:
    """One `kubectl get` column (a CRD additionalPrinterColumn): `json_path` as `.spec.size`; priority 0 shows
    by default, 1 only with `-o wide`."""

    name: str
    json_path: str
    type: ColumnType = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def manifest(self) -> dict[str, Any]:
        """The additionalPrinterColumns entry."""
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.format:
            out["format"] = self.format
        if self.description:
            out["description"] = self.description
        out["jsonPath"] = self.json_path
        if self.priority:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True)
class ScaleSubresource:
    """The scale subresource (so `kubectl scale` and a HorizontalPodAutoscaler work on the kind)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def manifest(self) -> dict[str, Any]:
        """The CRD's `subresources.scale`."""
        out = {"specReplicasPath": self.spec_replicas_path, "statusReplicasPath": self.status_replicas_path}
        if self.label_selector_path:
            out["labelSelectorPath"] = self.label_selector_path
        return out


def _where(loc: tuple[Any, ...]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _explain(error: Any) -> str:
    """One pydantic error as `path: what is wrong (got value)`."""
    ctx = error.get("ctx") or {}
    kind = error.get("type", "")
    messages = {
        "less_than_equal": "must be at most {le}",
        "greater_than_equal": "must be at least {ge}",
        "less_than": "must be less than {lt}",
        "greater_than": "must be greater than {gt}",
        "string_too_short": "must be at least {min_length} characters long",
        "string_too_long": "must be at most {max_length} characters long",
        "string_pattern_mismatch": "must match the pattern {pattern}",
        "too_short": "must have at least {min_length} items",
        "too_long": "must have at most {max_length} items",
        "missing": "is required",
    }
    text = messages[kind].format(**ctx) if kind in messages else error.get("msg", "is invalid")
    text = text.removeprefix("Value error, ")  # a model's own validator: its message as it wrote it
    if kind == "missing":
        return f"{_where(error['loc'])}: {text}"
    return f"{_where(error['loc'])}: {text} (got {error.get('input')!r})"


def spec_errors(exc: ValidationError) -> list[str]:
    """Each error of a spec validation as `spec.<path>: <what is wrong> (got <value>)`, in field order."""
    return [_explain(e) for e in exc.errors(include_url=False)]


def validate_spec(model: type[BaseModel], obj: dict[str, Any]) -> BaseModel:
    """The object's spec as an instance of `model` (its defaults applied); `PermanentError(reason=InvalidSpec)`
    naming each bad field when the spec does not validate, or when it is missing or not an object."""
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise PermanentError(f"spec must be an object, not {type(spec).__name__}", reason=INVALID_SPEC)
    try:
        # through JSON, as the API server sees the object: strict types, enums and timestamps given as strings
        return model.model_validate_json(json.dumps(spec))
    except ValidationError as exc:
        raise PermanentError("; ".join(spec_errors(exc)), reason=INVALID_SPEC) from None
