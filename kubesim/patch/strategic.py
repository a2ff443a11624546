"""Strategic merge patch for built-in kinds: lists merged by their patchMergeKey (containers by name, ...).

Supports the directives kubectl's three-way patches use: ``$patch: replace|delete``, ``$retainKeys``,
``$setElementOrder/<field>`` and ``$deleteFromPrimitiveList/<field>``.
"""

from __future__ import annotations

from typing import Any

from kubesim.meta import clone

MergeKeys = dict[tuple[str, ...], str]  # list path -> merge key ("" = merge a list of primitives)

_CONTAINER = {("env",): "name", ("ports",): "containerPort", ("volumeMounts",): "mountPath",
              ("volumeDevices",): "devicePath", ("envFrom",): ""}
_POD_SPEC: MergeKeys = {("volumes",): "name", ("imagePullSecrets",): "name", ("hostAliases",): "ip",
                        ("topologySpreadConstraints",): "topologyKey", ("resourceClaims",): "name",
                        ("schedulingGates",): "name"}
for _field in ("containers", "initContainers", "ephemeralContainers"):
    _POD_SPEC[(_field,)] = "name"
    for _sub, _key in _CONTAINER.items():
        if _key:
            _POD_SPEC[(_field, "*") + _sub] = _key
METADATA: MergeKeys = {("metadata", "finalizers"): "", ("metadata", "ownerReferences"): "uid"}
_CONDITIONS: MergeKeys = {("status", "conditions"): "type"}


def _prefixed(prefix: tuple[str, ...], keys: MergeKeys) -> MergeKeys:
    return {prefix + k: v for k, v in keys.items()}


def _workload() -> MergeKeys:
    keys = dict(METADATA)
    keys.update(_prefixed(("spec", "template", "spec"), _POD_SPEC))
    keys.update(_prefixed(("spec", "template"), METADATA))
    keys.update(_CONDITIONS)
    return keys


MERGE_KEYS: dict[tuple[str, str], MergeKeys] = {
    ("", "pods"): {**METADATA, **_prefixed(("spec",), _POD_SPEC), **_CONDITIONS, ("status", "podIPs"): "ip"},
    ("", "services"): {**METADATA, ("spec", "ports"): "port", **_CONDITIONS},
    ("", "nodes"): {**METADATA, **_CONDITIONS, ("status", "addresses"): "type"},
    ("", "namespaces"): {**METADATA, **_CONDITIONS},
    ("apps", "deployments"): _workload(),
    ("apps", "replicasets"): _workload(),
    ("apps", "statefulsets"): _workload(),
    ("batch", "jobs"): _workload(),
    ("batch", "cronjobs"): {**METADATA, **_prefixed(("spec", "jobTemplate"), METADATA),
                            **_prefixed(("spec", "jobTemplate", "spec", "template"), METADATA),
                            **_prefixed(("spec", "jobTemplate", "spec", "template", "spec"), _POD_SPEC)},
    ("policy", "poddisruptionbudgets"): {**METADATA, **_CONDITIONS},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {**METADATA, **_CONDITIONS},
}


def merge_keys_for(group: str, plural: str) -> MergeKeys:
    """The merge keys of a built-in resource (metadata lists only when nothing else is special)."""
    return MERGE_KEYS.get((group, plural), METADATA)


class StrategicPatchError(ValueError):
    """A malformed strategic merge patch."""


def strategic_merge(original: Any, patch: Any, keys: MergeKeys, path: tuple[str, ...] = ()) -> Any:
    """Apply a strategic merge patch; returns a new value."""
    if not isinstance(patch, dict) or not isinstance(original, dict):
        return _strip(clone(patch))
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip({k: clone(v) for k, v in patch.items() if k != "$patch"})
    result = clone(original)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub = path + (key,)
        if isinstance(value, dict):
            if value.get("$patch") == "delete":
                result.pop(key, None)
                continue
            result[key] = strategic_merge(result.get(key), value, keys, sub)
        elif isinstance(value, list) and sub in keys:
            result[key] = _merge_list(result.get(key), value, keys[sub], keys, sub)
        else:
            result[key] = _strip(clone(value))
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _reorder(result[field], order, keys.get(path + (field,), ""))
    return result


def _strip(value: Any) -> Any:
    """Drop directive keys from a value that replaces wholesale."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _merge_list(original: Any, patch: list[Any], merge_key: str, keys: MergeKeys, path: tuple[str, ...]) -> list:
    base = list(original) if isinstance(original, list) else []
    if not merge_key:
        out = list(base)
        for v in patch:
            if v not in out:
                out.append(v)
        return out
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [_strip(clone(i)) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    out = [clone(v) for v in base]
    for item in patch:
        if not isinstance(item, dict):
            raise StrategicPatchError(f"expected a map in list {'.'.join(path)}")
        if merge_key not in item:
            raise StrategicPatchError(f"map: {item} does not contain declared merge key: {merge_key}")
        idx = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(merge_key) == item[merge_key]),
                   None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(_strip(clone(item)))
        else:
            out[idx] = strategic_merge(out[idx], item, keys, path + ("*",))
    return out


def _reorder(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    def ident(v: Any) -> Any:
        return v.get(merge_key) if merge_key and isinstance(v, dict) else v

    wanted = [ident(o) for o in order]
    first = [i for w in wanted for i in items if ident(i) == w]
    rest = [i for i in items if ident(i) not in wanted]
    return first + rest
