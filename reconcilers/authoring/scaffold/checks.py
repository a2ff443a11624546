"""The scaffold's checks: each refuses one kind of bad input or target with a `ScaffoldError` naming it, before
anything is rendered or written. `parse_owns` turns `--owns` into `Owned` entries."""

from __future__ import annotations

import importlib.util
import keyword
import sys
from pathlib import Path

from reconcilers.authoring.scaffold.names import (
    BUILTIN,
    BUILTIN_KINDS,
    CORE_OR_GROUP,
    GROUP,
    KIND,
    PROJECT_MODULES,
    VERSION,
    Owned,
    ScaffoldError,
    plural_of,
    snake,
)
from reconcilers.engine import registry


def check_kind(kind: str) -> None:
    """The kind is UpperCamelCase, not a built-in kind and not a registered one."""
    if not KIND.match(kind) or not kind.isidentifier() or keyword.iskeyword(kind):
        raise ScaffoldError(f"kind {kind!r} must be UpperCamelCase: a letter A-Z, then letters and digits "
                            "(at most 63 characters), e.g. Website")
    if kind in BUILTIN_KINDS:
        raise ScaffoldError(f"kind {kind!r} is a built-in Kubernetes kind; choose another name")
    for rec in registry.registered():
        if rec.resource.kind.lower() == kind.lower():
            raise ScaffoldError(f"kind {kind!r} collides with the registered kind {rec.resource.kind} "
                                f"({rec.resource.plural}.{rec.resource.group}, {type(rec).__module__})")


def check_group(group: str) -> None:
    """The group is a DNS subdomain with a dot, not one of Kubernetes' own."""
    if len(group) > 253 or not GROUP.match(group):
        raise ScaffoldError(f"group {group!r} must be a DNS subdomain with at least one dot, in lower case "
                            "(e.g. web.example.com)")
    if group.endswith((".k8s.io", ".kubernetes.io")) or group in ("k8s.io", "kubernetes.io"):
        raise ScaffoldError(f"group {group!r} is reserved for Kubernetes' own APIs; use a domain of yours")


def check_version(version: str, what: str = "version") -> None:
    """The version is a Kubernetes API version (`what` names it in the error)."""
    if not VERSION.match(version):
        raise ScaffoldError(f"{what} {version!r} is not a Kubernetes API version (v1, v1alpha1, v2beta3, ...)")


def parse_owns(text: str) -> tuple[Owned, ...]:
    """`apps/v1/Deployment,v1/Service` → the Owned entries (plural and scope from Kubernetes' kinds or the
    registered ones, else the English plural and namespaced); ScaffoldError naming a bad entry."""
    out: list[Owned] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        parts = entry.split("/")
        if len(parts) not in (2, 3):
            raise ScaffoldError(f"--owns entry {entry!r} must be group/version/Kind (apps/v1/Deployment) "
                                "or version/Kind for the core group (v1/Service)")
        group, version, kind = parts if len(parts) == 3 else ("", *parts)
        if len(parts) == 3 and not CORE_OR_GROUP.match(group):
            raise ScaffoldError(f"--owns entry {entry!r}: {group!r} is not an API group")
        check_version(version, f"--owns entry {entry!r}: version")
        if not KIND.match(kind):
            raise ScaffoldError(f"--owns entry {entry!r}: {kind!r} is not a kind (UpperCamelCase)")
        plural, namespaced = BUILTIN.get((group, kind), (plural_of(kind), True))
        for rec in registry.registered():
            if (rec.resource.group, rec.resource.kind) == (group, kind):
                plural, namespaced = rec.resource.plural, rec.resource.namespaced
        if any(o.kind == kind for o in out) or any(o.name == snake(kind) for o in out):
            raise ScaffoldError(f"--owns names {kind} twice; a kind owns one child of each kind here")
        out.append(Owned(group, version, kind, plural, namespaced))
    return tuple(out)


def check_scope(namespaced: bool, owns: tuple[Owned, ...]) -> None:
    """Owner and children agree on scope (see the package docstring)."""
    if namespaced:
        cluster = [o for o in owns if not o.namespaced]
        if cluster:
            names = ", ".join(f"{o.api_version}/{o.kind}" for o in cluster)
            raise ScaffoldError(f"a namespaced kind cannot own cluster-scoped kinds ({names}): Kubernetes' "
                                "garbage collector does not let a cluster-scoped object depend on a namespaced "
                                "one; use --cluster-scoped, or drop them from --owns")
    else:
        local = [o for o in owns if o.namespaced]
        if local:
            names = ", ".join(f"{o.api_version}/{o.kind}" for o in local)
            raise ScaffoldError(f"--cluster-scoped with namespaced --owns kinds ({names}): their objects need a "
                                "namespace, which a cluster-scoped kind does not have. Make the kind namespaced "
                                "(drop --cluster-scoped), or own only cluster-scoped kinds (v1/Namespace, "
                                "rbac.authorization.k8s.io/v1/ClusterRole, ...) and add the namespaced children "
                                "yourself in a namespace named by the spec, as reconcilers/kinds/tenant.py does")


def check_package(package: str, directory: Path) -> None:
    """The package name is a lower-case identifier that shadows no importable module."""
    if not package.isidentifier() or keyword.iskeyword(package) or not package.islower():
        raise ScaffoldError(f"package name {package!r} (from {directory}) is not a lower-case Python identifier; "
                            "name the directory like a module (e.g. --package website)")
    shadowed = package in sys.stdlib_module_names or package in PROJECT_MODULES
    if not shadowed:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        # an importable module of that name, other than the (empty) target directory itself
        shadowed = spec is not None and directory not in [Path(p).resolve() for p in
                                                          spec.submodule_search_locations or ()]
    if shadowed:
        raise ScaffoldError(f"package name {package!r} would shadow the module {package!r}; choose another "
                            "(--package DIR)")


def check_target(directory: Path, files: dict[str, str]) -> None:
    """The target is a missing or empty directory in an existing one: nothing is ever overwritten."""
    if directory.exists() and not directory.is_dir():
        raise ScaffoldError(f"{directory} exists and is not a directory; refusing to overwrite it")
    if directory.is_dir():
        taken = [str(directory / name) for name in files if (directory / name).exists()]
        if taken:
            raise ScaffoldError(f"refusing to overwrite {', '.join(taken)}")
        if any(directory.iterdir()):
            raise ScaffoldError(f"{directory} exists and is not empty; refusing to write into it")
    if not directory.parent.is_dir():
        raise ScaffoldError(f"{directory.parent} is not a directory")

