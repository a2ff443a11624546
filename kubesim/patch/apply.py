"""Server-side apply field sets: which fields a manager's applied configuration sets (as ``fieldsV1``),
and removing the fields a manager stopped applying (unless another applier still sets them).

Maps are tracked field by field; lists and scalars are leaves (a simplification of the real
structured-merge-diff, which also tracks list items by key).
"""

from __future__ import annotations

from typing import Any

Path = tuple[str, ...]


def _walk(value: dict[str, Any], prefix: Path, out: set[Path]) -> None:
    for key, sub in value.items():
        path = prefix + (key,)
        if isinstance(sub, dict) and sub:
            _walk(sub, path, out)
        else:
            out.add(path)


def applied_paths(config: dict[str, Any]) -> set[Path]:
    """Leaf paths an apply configuration sets (metadata: labels and annotations only)."""
    out: set[Path] = set()
    for key, value in config.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            for mkey in ("labels", "annotations"):
                sub = (value or {}).get(mkey)
                if isinstance(sub, dict):
                    _walk(sub, ("metadata", mkey), out)
            continue
        if isinstance(value, dict) and value:
            _walk(value, (key,), out)
        else:
            out.add((key,))
    return out


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    """The ``fieldsV1`` form (``{"f:spec": {"f:size": {}}}``)."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def from_fields_v1(fields: dict[str, Any] | None) -> set[Path]:
    """Leaf paths of a ``fieldsV1`` document written by :func:`to_fields_v1`."""
    out: set[Path] = set()

    def walk(node: dict[str, Any], prefix: Path) -> None:
        for key, sub in node.items():
            if not key.startswith("f:"):
                continue
            path = prefix + (key[2:],)
            if isinstance(sub, dict) and any(k.startswith("f:") for k in sub):
                walk(sub, path)
            else:
                out.add(path)

    walk(fields or {}, ())
    return out


def release(obj: dict[str, Any], released: set[Path], kept: set[Path]) -> None:
    """Delete ``released`` paths from ``obj`` (in place), and parents they leave empty unless ``kept``
    still reaches into them."""
    kept_prefixes = {p[:i] for p in kept for i in range(1, len(p) + 1)}
    for path in sorted(released, key=len, reverse=True):
        if path in kept_prefixes:
            continue
        parents = []
        node: Any = obj
        for part in path[:-1]:
            if not isinstance(node, dict) or part not in node:
                node = None
                break
            parents.append((node, part))
            node = node[part]
        if not isinstance(node, dict) or path[-1] not in node:
            continue
        del node[path[-1]]
        depth = len(path) - 1
        while parents and depth > 1:
            parent, key = parents.pop()
            if parent[key] == {} and path[:depth] not in kept_prefixes:
                del parent[key]
            depth -= 1
