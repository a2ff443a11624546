"""Which kinds a test session tests: loading Reconciler classes by name and finding one by apiVersion + kind.

The plugin's default for the `opsconsole_kinds` fixture is, in this order: the dotted paths of the ini option
`opsconsole_kinds` (one per line, `package.module.ClassName` or `package.module:ClassName`), else the Python
entry points of group `opsconsole.kinds` of the installed distributions (as the engine's registry reads them),
else nothing. No Django here: the engine's registry reads settings, so this module has its own loader.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when first needed: the plugin loads this module in every pytest run
    from reconcilers.core.reconciler import Reconciler

ENTRY_POINT_GROUP = "opsconsole.kinds"  # the same group reconcilers.engine.registry reads
INI_OPTION = "opsconsole_kinds"

NO_KINDS = (
    "no kinds to test: override the `opsconsole_kinds` fixture (`@pytest.fixture(scope=\"session\")` returning "
    "a list of Reconciler classes) in your conftest.py or test module, set the ini option `opsconsole_kinds` "
    "(dotted paths, one per line), or declare your kinds under [project.entry-points.\"opsconsole.kinds\"] "
    "and install your package"
)


class KindNotFound(LookupError):
    """No kind under test reconciles this apiVersion + kind."""


def import_kind(path: str, origin: str = INI_OPTION) -> type[Reconciler]:
    """Import `package.module.ClassName` (or `package.module:ClassName`); ImportError or TypeError naming the
    path and where it came from."""
    from reconcilers.core.reconciler import Reconciler

    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"{origin}: {path!r} is not a dotted path (package.module.ClassName)")
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"{origin}: cannot import kind {path!r}: {exc}") from exc
    if not (isinstance(obj, type) and issubclass(obj, Reconciler)):
        raise TypeError(f"{origin}: {path!r} is not a Reconciler subclass")
    return obj


def entry_point_kinds() -> list[type[Reconciler]]:
    """The Reconciler classes installed distributions declare under the `opsconsole.kinds` entry points."""
    out = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else "?"
        out.append(import_kind(ep.value, f"entry point {ep.name!r} of {dist}"))
    return out


def default_kinds(ini_paths: Sequence[str]) -> list[type[Reconciler]]:
    """The ini option's kinds when it names any, else the installed entry points' kinds (possibly none)."""
    paths = [p.strip() for p in ini_paths if p and p.strip()]
    if paths:
        return unique(import_kind(p) for p in paths)
    return unique(entry_point_kinds())


def unique(kinds: Iterable[type[Reconciler]]) -> list[type[Reconciler]]:
    """Each class once, in order."""
    out: list[type[Reconciler]] = []
    for cls in kinds:
        if cls not in out:
            out.append(cls)
    return out


def find_kind(kinds: Sequence[type[Reconciler]], api_version: str, kind: str) -> type[Reconciler]:
    """The kind under test that reconciles objects of `api_version` + `kind`; KindNotFound naming those tested."""
    for cls in kinds:
        if cls.resource.api_version == api_version and cls.resource.kind == kind:
            return cls
    if not kinds:
        raise KindNotFound(f"no kind reconciles {api_version} {kind}: {NO_KINDS}")
    known = ", ".join(f"{c.resource.api_version} {c.resource.kind} ({c.__name__})" for c in kinds)
    raise KindNotFound(f"no kind under test reconciles {api_version} {kind}; the kinds under test "
                       f"(opsconsole_kinds) are: {known}")


def dotted_path(cls: type[Reconciler]) -> str:
    """`package.module.ClassName` by which another process imports `cls`; ValueError when it cannot (a class
    defined inside a function, or in `__main__`)."""
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        raise ValueError(f"{cls.__qualname__} (module {cls.__module__}) cannot be imported by another process: "
                         "define it at the top level of an importable module")
    return f"{cls.__module__}.{cls.__qualname__}"
