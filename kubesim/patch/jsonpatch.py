"""RFC 7386 JSON merge patch and RFC 6902 JSON patch on plain JSON values."""

from __future__ import annotations

from typing import Any

from kubesim.meta import clone


class PatchError(ValueError):
    """A patch that cannot be applied to the document."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch; returns a new value (``target`` is not modified)."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f"doc is missing path: {path!r}")
            cur = cur[part]
        elif isinstance(cur, list):
            try:
                cur = cur[int(part)]
            except (ValueError, IndexError) as e:
                raise PatchError(f"doc is missing path: {path!r}") from e
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return cur


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise PatchError(f"doc is missing path: {path!r}") from e


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    try:
        if isinstance(parent, list):
            return parent.pop(int(last))
        return parent.pop(last)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
        raise PatchError(f"unable to remove nonexistent key: {last}: missing value") from e


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, list):
        if last == "-":
            if replace:
                raise PatchError(f"doc is missing path: {path!r}")
            parent.append(value)
            return doc
        try:
            idx = int(last)
        except ValueError as e:
            raise PatchError(f"invalid array index {last!r}") from e
        if replace:
            if not 0 <= idx < len(parent):
                raise PatchError(f"doc is missing path: {path!r}")
            parent[idx] = value
        else:
            if not 0 <= idx <= len(parent):
                raise PatchError(f"unable to access invalid index: {idx}")
            parent.insert(idx, value)
    elif isinstance(parent, dict):
        if replace and last not in parent:
            raise PatchError(f"doc is missing key: {path!r}: missing value")
        parent[last] = value
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def apply_json_patch(doc: Any, ops: Any) -> Any:
    """Apply a JSON patch (a list of operations); returns a new document."""
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations")
    doc = clone(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError("unexpected kind of operation")
        kind, path = op["op"], op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, clone(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, clone(op.get("value")), replace=True)
        elif kind == "move":
            value = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, clone(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc
