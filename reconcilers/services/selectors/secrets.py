"""A Kubernetes Secret as the console may show it: as `kubectl describe` does, each key with its size and never a
value (`data`, `stringData`, and the annotations kubectl copies them into)."""

from __future__ import annotations

from typing import Any

#: annotations that may hold a Secret's values (kubectl apply keeps the whole applied object in the first)
SECRET_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def secret_redacted(obj: dict[str, Any]) -> dict[str, Any]:
    """A Secret as `kubectl describe` shows it: each key of `data` and `stringData` with its size in bytes
    (`<N bytes>`), never a value; the annotations that may copy the values are replaced by a note. Other kinds:
    unchanged."""
    if obj.get("kind") != "Secret" or str(obj.get("apiVersion", "v1")) != "v1":
        return obj
    for field_name in ("data", "stringData"):
        values = obj.get(field_name)
        if isinstance(values, dict):
            obj[field_name] = {k: f"<{_secret_size(v, field_name == 'data')} bytes>" for k, v in values.items()}
        elif field_name in obj:
            obj[field_name] = "<redacted>"
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, dict):
        for key in SECRET_ANNOTATIONS:
            if key in annotations:
                annotations[key] = "<redacted: it may hold the Secret's values>"
    return obj


def _secret_size(value: Any, encoded: bool) -> int:
    text = value if isinstance(value, str) else ""
    if encoded:  # base64: the decoded size, as kubectl describe gives it
        return max(0, len(text) * 3 // 4 - text.count("=", -2))
    return len(text.encode())
