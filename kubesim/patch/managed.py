"""``metadata.managedFields`` for every write, as kube-apiserver's field manager keeps them.

A write compares the object before and after it (only the subtrees that differ are walked). The fields it
added or modified become owned by the writer's entry, keyed by (manager, operation, subresource); those
fields and the ones it removed leave every other entry (an Update always takes ownership, as the real
structured-merge-diff ``Updater.Update`` does with ``force``); removed fields leave the writer's own set
too; an entry left with no field is dropped.

Paths are tuples of ``fieldsV1`` keys: ``f:<field>`` for map fields, ``k:{"type":"Ready"}`` for items of
lists merged by key (the strategic merge keys of built-ins; ``x-kubernetes-list-type: map`` in a CRD
schema), ``v:<json>`` for items of sets (finalizers; ``x-kubernetes-list-type: set``); other lists are
atomic (one leaf). Only leaves are recorded (no ``"."`` entries for a map or list item itself).

A request's ``fieldManager`` is checked as kube-apiserver's ``ValidateFieldManager`` does before anything is
written (``check_field_manager``): at most 128 bytes and printable characters only, else 422 Invalid on the
request's options (``CreateOptions``, ``UpdateOptions``, ``PatchOptions`` of ``meta.k8s.io``).
"""

from __future__ import annotations

import json
from typing import Any

from kubesim import errors
from kubesim.patch.strategic import METADATA, merge_keys_for

FieldPath = tuple[str, ...]
ListKeys = dict[tuple[str, ...], tuple[str, ...]]  # list path ("*" for an item) -> map keys; () = a set

UNTRACKED_METADATA = frozenset({"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp",
                                "selfLink", "name", "namespace", "deletionTimestamp",
                                "deletionGracePeriodSeconds"})
MAX_UPDATE_MANAGERS = 10  # beyond this the oldest Update entries merge into "ancient-changes", as in kube

FIELD_MANAGER_MAX_BYTES = 128  # kube-apiserver's FieldManagerMaxLength (bytes, as Go's len)
#: the options kind kube-apiserver names in the 422 of a bad fieldManager, per request method
OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               "\\": "\\\\", '"': '\\"'}

_BUILTIN_KEYS: dict[tuple[str, str], ListKeys] = {}
_SCHEMA_KEYS: dict[int, tuple[Any, ListKeys]] = {}


def _convert(keys: dict[tuple[str, ...], str]) -> ListKeys:
    return {path: ((key,) if key else ()) for path, key in keys.items()}


def builtin_list_keys(group: str, plural: str) -> ListKeys:
    """The keyed lists and sets of a built-in resource (its strategic merge keys)."""
    found = _BUILTIN_KEYS.get((group, plural))
    if found is None:
        found = _BUILTIN_KEYS[(group, plural)] = _convert(merge_keys_for(group, plural))
    return found


def schema_list_keys(schema: dict[str, Any] | None) -> ListKeys:
    """The keyed lists and sets an openAPIV3Schema declares (``x-kubernetes-list-type``), plus metadata's."""
    schema = schema or {}
    cached = _SCHEMA_KEYS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    out = _convert(METADATA)

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        list_type = node.get("x-kubernetes-list-type")
        map_keys = node.get("x-kubernetes-list-map-keys")
        if list_type == "map" and isinstance(map_keys, list) and map_keys:
            out[path] = tuple(str(k) for k in map_keys)
        elif list_type == "set":
            out[path] = ()
        for key, sub in (node.get("properties") or {}).items():
            if path or key != "metadata":
                walk(sub, path + (key,))
        walk(node.get("items"), path + ("*",))

    walk(schema, ())
    if len(_SCHEMA_KEYS) > 512:
        _SCHEMA_KEYS.clear()
    _SCHEMA_KEYS[id(schema)] = (schema, out)
    return out


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _index(items: list[Any], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """List items by their ``k:``/``v:`` key, or None when the list cannot be keyed (then it is atomic)."""
    out: dict[str, Any] = {}
    for item in items:
        if keys:
            if not isinstance(item, dict) or any(k not in item for k in keys):
                return None
            ident = "k:" + _compact({k: item[k] for k in keys})
        else:
            ident = "v:" + _compact(item)
        if ident in out:
            return None
        out[ident] = item
    return out


class _Differ:
    def __init__(self, keys: ListKeys) -> None:
        self.keys = keys
        self.changed: set[FieldPath] = set()
        self.removed: set[FieldPath] = set()

    def maps(self, a: dict[str, Any], b: dict[str, Any], fp: FieldPath, sp: tuple[str, ...]) -> None:
        for key, value in b.items():
            if key in a:
                self.values(a[key], value, fp + ("f:" + key,), sp + (key,))
            else:
                self.leaves(value, fp + ("f:" + key,), sp + (key,))
        for key in a:
            if key not in b:
                self.removed.add(fp + ("f:" + key,))

    def values(self, a: Any, b: Any, fp: FieldPath, sp: tuple[str, ...]) -> None:
        if a == b and type(a) is type(b):
            return
        if isinstance(a, dict) and isinstance(b, dict) and a and b:
            self.maps(a, b, fp, sp)
            return
        if isinstance(a, list) and isinstance(b, list) and sp in self.keys:
            ia, ib = _index(a, self.keys[sp]), _index(b, self.keys[sp])
            if ia is not None and ib is not None and ia and ib:
                item_sp = sp + ("*",)
                for ident, item in ib.items():
                    if ident in ia:
                        self.values(ia[ident], item, fp + (ident,), item_sp)
                    else:
                        self.leaves(item, fp + (ident,), item_sp)
                for ident in ia:
                    if ident not in ib:
                        self.removed.add(fp + (ident,))
                return
        if isinstance(a, dict | list):
            self.removed.add(fp)
        self.leaves(b, fp, sp)

    def leaves(self, value: Any, fp: FieldPath, sp: tuple[str, ...]) -> None:
        if isinstance(value, dict) and value:
            for key, sub in value.items():
                self.leaves(sub, fp + ("f:" + key,), sp + (key,))
            return
        if isinstance(value, list) and value and sp in self.keys:
            indexed = _index(value, self.keys[sp])
            if indexed is not None:
                for ident, item in indexed.items():
                    if ident.startswith("k:"):
                        self.leaves(item, fp + (ident,), sp + ("*",))
                    else:
                        self.changed.add(fp + (ident,))
                return
        self.changed.add(fp)


def tracked(obj: dict[str, Any] | None, subresource: str | None, has_status: bool) -> dict[str, Any]:
    """The part of ``obj`` a write's field set covers (a shallow view)."""
    if not obj:
        return {}
    if subresource == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    if has_status:
        out.pop("status", None)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        view = {k: v for k, v in meta.items() if k not in UNTRACKED_METADATA}
        if view:
            out["metadata"] = view
    return out


def diff(old: dict[str, Any], new: dict[str, Any], keys: ListKeys) -> tuple[set[FieldPath], set[FieldPath]]:
    """(leaf paths ``new`` added or modified, paths of subtrees ``old`` had and ``new`` lacks)."""
    d = _Differ(keys)
    d.maps(old, new, (), ())
    return d.changed, d.removed


def strip(fields: dict[str, Any], path: FieldPath) -> bool:
    """Take ``path`` (and everything under it, or the leaf above it that owns it whole) out of a
    ``fieldsV1`` document, in place, pruning parents left empty; True when something was taken."""
    trail: list[tuple[dict[str, Any], str]] = []
    node = fields
    for part in path:
        child = node.get(part)
        if not isinstance(child, dict):
            return False
        trail.append((node, part))
        if not child:
            break
        node = child
    if not trail:
        return False
    parent, part = trail.pop()
    del parent[part]
    for parent, part in reversed(trail):
        if parent[part]:
            break
        del parent[part]
    return True


def _reaches(fields: dict[str, Any], path: FieldPath) -> bool:
    """Whether :func:`strip` would take something for ``path``."""
    node = fields
    for part in path:
        child = node.get(part)
        if not isinstance(child, dict):
            return False
        if not child:
            return True
        node = child
    return True


def _has(fields: dict[str, Any], path: FieldPath) -> bool:
    """Whether ``path`` is already owned (as a leaf or a map with fields under it)."""
    node = fields
    for part in path:
        node = node.get(part)
        if not isinstance(node, dict):
            return False
    return True


def add(fields: dict[str, Any], path: FieldPath) -> None:
    """Own ``path`` in a ``fieldsV1`` document (in place)."""
    node = fields
    for part in path:
        node = node.setdefault(part, {})


def paths(fields: dict[str, Any] | None, prefix: FieldPath = ()) -> set[FieldPath]:
    """Leaf paths of a ``fieldsV1`` document (``"."`` entries ignored)."""
    out: set[FieldPath] = set()
    for key, sub in (fields or {}).items():
        if key == ".":
            continue
        if isinstance(sub, dict) and any(k != "." for k in sub):
            out |= paths(sub, prefix + (key,))
        else:
            out.add(prefix + (key,))
    return out


def _sort_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """kube's order of encoded managedFields: operation, time, manager, apiVersion, subresource."""
    get = entry.get
    return (get("operation") or "", get("time") or "", get("manager") or "", get("apiVersion") or "",
            get("subresource") or "")


def update_entries(entries: list[dict[str, Any]], changed: set[FieldPath], removed: set[FieldPath], *,
                   manager: str, subresource: str | None, api_version: str, time: str,
                   applied: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The managedFields after a write by ``manager`` (``entries`` are not modified).

    ``applied``: the applier's new Apply entry (server-side apply); otherwise the write is an Update.
    """
    operation = "Apply" if applied is not None else "Update"
    sub = subresource or ""
    taken = changed | removed
    out: list[dict[str, Any]] = []
    mine: dict[str, Any] | None = None
    for entry in entries:
        if not isinstance(entry, dict) or not entry:
            continue
        if (entry.get("manager") == manager and entry.get("operation") == operation
                and (entry.get("subresource") or "") == sub):
            mine = entry
            continue
        fields = entry.get("fieldsV1")
        if taken and isinstance(fields, dict) and any(_reaches(fields, path) for path in taken):
            fields = _deep(fields)
            touched = False
            for path in taken:
                touched = strip(fields, path) or touched
            if touched:
                if not fields:
                    continue
                entry = {**entry, "fieldsV1": fields}
        out.append(entry)
    if applied is not None:
        out.append(applied)
    else:
        fields = mine.get("fieldsV1") if mine is not None else None
        if not isinstance(fields, dict) or removed or not all(_has(fields, path) for path in changed):
            fields = _deep(fields) if isinstance(fields, dict) else {}
            for path in removed:
                strip(fields, path)
            for path in changed:
                add(fields, path)
        if fields:
            entry = {"manager": manager, "operation": "Update", "apiVersion": api_version, "time": time,
                     "fieldsType": "FieldsV1", "fieldsV1": fields}
            if subresource:
                entry["subresource"] = subresource
            out.append(entry)
        out = _cap_updates(out)
    out.sort(key=_sort_key)
    return out


def _cap_updates(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    updates = [e for e in entries if e.get("operation") == "Update"]
    if len(updates) <= MAX_UPDATE_MANAGERS:
        return entries
    updates.sort(key=lambda e: str(e.get("time", "")))
    oldest = updates[:len(updates) - MAX_UPDATE_MANAGERS + 1]
    merged: dict[str, Any] = {}
    for e in oldest:
        for path in paths(e.get("fieldsV1")):
            add(merged, path)
    ancient = {"manager": "ancient-changes", "operation": "Update", "apiVersion": oldest[-1].get("apiVersion"),
               "time": oldest[-1].get("time"), "fieldsType": "FieldsV1", "fieldsV1": merged}
    drop = {id(e) for e in oldest}
    return [e for e in entries if id(e) not in drop] + [ancient]


def _deep(value: dict[str, Any]) -> dict[str, Any]:
    return {k: _deep(v) if isinstance(v, dict) else v for k, v in value.items()}


def _go_quote(value: str) -> str:
    """``value`` as Go's ``%q`` prints it (``strconv.Quote``), as kube-apiserver shows an invalid value."""
    out = []
    for ch in value:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def field_manager_causes(manager: str | None) -> list[dict[str, str]]:
    """What kube-apiserver's ``ValidateFieldManager`` finds wrong with ``manager`` (none for ''/None: unset): more
    than 128 bytes (``FieldValueTooLong``), and each character that is not printable (Go's ``unicode.IsPrint``,
    which is Python's ``str.isprintable``), at its byte position (``FieldValueInvalid``)."""
    if not manager:
        return []
    causes = []
    if len(manager.encode("utf-8")) > FIELD_MANAGER_MAX_BYTES:
        causes.append(errors.cause("fieldManager", "FieldValueTooLong",
                                   f"Too long: must have at most {FIELD_MANAGER_MAX_BYTES} bytes"))
    position = 0
    for ch in manager:
        if not ch.isprintable():
            causes.append(errors.cause("fieldManager", "FieldValueInvalid",
                                       f"Invalid value: {_go_quote(manager)}: invalid character U+{ord(ch):04X} "
                                       f"(at position {position})"))
        position += len(ch.encode("utf-8"))
    return causes


def check_field_manager(manager: str | None, method: str) -> None:
    """Refuse a request whose ``fieldManager`` kube-apiserver refuses: 422 Invalid naming the request's options
    (``PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: must have at most 128 bytes``)."""
    causes = field_manager_causes(manager)
    if causes:
        raise errors.invalid(OPTIONS_KIND.get(method, "PatchOptions"), "meta.k8s.io", "", causes)
