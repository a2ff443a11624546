"""The resource types kubesim serves: built-in kinds plus those defined by CustomResourceDefinitions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass
class ScaleSpec:
    """Where the scale subresource reads and writes replicas (JSONPath-like dotted paths)."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".status.selector"


@dataclass
class ResourceType:
    """One served resource: names, scope, versions, subresources and the rules its objects follow."""

    group: str
    versions: list[str]
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    status: bool = False
    scale: ScaleSpec | None = None
    verbs: list[str] = field(default_factory=lambda: list(ALL_VERBS))
    storage_version: str = ""
    tracks_generation: bool = False
    return_deleted: bool = False
    builtin: bool = True
    crd_name: str | None = None
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    printer_columns: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    field_selectors: tuple[str, ...] = ()
    # storage shared with another type (events.k8s.io/v1 Event is stored as core/v1 Event)
    storage_key_override: tuple[str, str] | None = None
    convert_out: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
    convert_in: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: served versions a CRD marks deprecated → the Warning every request to them gets
    deprecated: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.storage_version:
            self.storage_version = self.versions[0]

    @property
    def key(self) -> tuple[str, str]:
        """The store key: (group, plural)."""
        return self.storage_key_override or (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        """The kind of a list of these objects."""
        return self.kind + "List"

    def api_version(self, version: str | None = None) -> str:
        """``group/version`` (``v1`` alone for the core group)."""
        version = version or self.storage_version
        return f"{self.group}/{version}" if self.group else version

    def external(self, obj: dict[str, Any], version: str) -> dict[str, Any]:
        """The stored object as served at ``version`` (shallow copy when the apiVersion differs)."""
        if self.convert_out is not None:
            return self.convert_out(obj, version)
        api_version = self.api_version(version)
        if obj.get("apiVersion") == api_version:
            return obj
        out = dict(obj)
        out["apiVersion"] = api_version
        return out

    def internal(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A request body converted to the storage form."""
        if self.convert_in is not None:
            return self.convert_in(obj)
        obj["apiVersion"] = self.api_version(self.storage_version)
        return obj


class Registry:
    """Lookup of resource types by group/version/plural, by kind, and discovery listings."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str], ResourceType] = {}
        self.generation = 0

    def add(self, rt: ResourceType) -> None:
        """Serve ``rt`` (replacing a type with the same group and plural)."""
        self._types[(rt.group, rt.plural)] = rt
        self.generation += 1

    def remove(self, group: str, plural: str) -> None:
        """Stop serving a type."""
        self._types.pop((group, plural), None)
        self.generation += 1

    def get(self, group: str, plural: str) -> ResourceType | None:
        """The type for (group, plural), any version."""
        return self._types.get((group, plural))

    def lookup(self, group: str, version: str, name: str) -> ResourceType | None:
        """The type served at group/version under its plural (or, like kubectl, short or singular name)."""
        rt = self._types.get((group, name))
        if rt is not None and version in rt.versions:
            return rt
        return None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        """The type for an object's apiVersion and kind."""
        group, _, version = api_version.rpartition("/")
        for rt in self._types.values():
            if rt.group == group and rt.kind == kind and version in rt.versions:
                return rt
        return None

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def groups(self) -> list[tuple[str, list[str]]]:
        """Non-core groups and their versions in preference order, in registration order."""
        seen: dict[str, list[str]] = {}
        for rt in self._types.values():
            if not rt.group:
                continue
            versions = seen.setdefault(rt.group, [])
            for v in rt.versions:
                if v not in versions:
                    versions.append(v)
        return [(g, sorted(vs, key=version_priority, reverse=True)) for g, vs in seen.items()]

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        """The types served at group/version."""
        return [rt for rt in self._types.values() if rt.group == group and version in rt.versions]


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA > beta > alpha, then by number (v2 > v1 > v1beta2)."""
    import re

    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", version)
    if not m:
        return (0, 0, 0)
    major = int(m.group(1))
    stage = {"alpha": 1, "beta": 2, None: 3}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, major, minor)
