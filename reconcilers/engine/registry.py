"""The kinds this installation runs: built-in, from installed packages' entry points, and named in settings.

Three sources, in this order, each kind once:
- the built-in kinds (`BUILTIN`: Memcached, Tenant, KVStore) unless `settings.OPSCONSOLE_BUILTIN_KINDS` is false;
- the Python entry points of group `opsconsole.kinds` of every installed distribution (a kind author's
  package declares `website = "website.kind:WebsiteReconciler"` under `[project.entry-points."opsconsole.kinds"]`)
  unless `settings.OPSCONSOLE_KIND_ENTRY_POINTS` is false;
- `settings.OPSCONSOLE_RECONCILERS`: dotted paths (`package.module.ClassName`).

Each names a `Reconciler` subclass; one instance of each is built per process and looked up by reconcile key or
by resource (group, plural). The same class named twice counts once; two classes for one resource are a
configuration error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib.metadata import entry_points

from django.conf import settings
from django.utils.module_loading import import_string

from reconcilers.core.reconciler import PHASE_CLASSES, Reconciler
from reconcilers.core.types import Request

ENTRY_POINT_GROUP = "opsconsole.kinds"
BUILTIN = (
    "reconcilers.kinds.memcached.MemcachedReconciler",
    "reconcilers.kinds.tenant.TenantReconciler",
    "reconcilers.kinds.kvstore.KVStoreReconciler",
)

_lock = threading.Lock()
_loaded: tuple[tuple[object, ...], list[Reconciler]] | None = None


class UnknownKind(LookupError):
    """No registered reconciler handles this resource."""


@dataclass(frozen=True)
class KindSource:
    """Where a kind was registered: `origin` is 'builtin', 'entry point <name> of <dist>' or 'settings'."""

    path: str  # dotted path (package.module.ClassName) or entry point value (package.module:ClassName)
    origin: str


def _reconciler_class(path: str, origin: str) -> type[Reconciler]:
    try:
        if ":" in path:  # an entry point value
            module, _, attr = path.partition(":")
            cls = import_string(f"{module}.{attr}")
        else:
            cls = import_string(path)
    except ImportError as exc:  # not a dotted path, no such module, or no such attribute in it
        raise ImportError(f"{origin} kind {path!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Reconciler)):
        raise TypeError(f"{origin} kind {path!r} is not a Reconciler subclass")
    _check_phase_classes(cls, f"{origin} kind {path!r}")
    return cls


def _check_phase_classes(cls: type[Reconciler], where: str) -> None:
    """ValueError unless every `phase_classes` entry names one of the machine's states and a known class."""
    declared = getattr(cls, "phase_classes", None) or {}
    if not isinstance(declared, dict):
        raise ValueError(f"{where}: phase_classes must be a dict {{phase: class}}, not {type(declared).__name__}")
    machine = getattr(cls, "state_machine", None)
    states = set(machine.states) if machine is not None else None
    for phase, klass in declared.items():
        if klass not in PHASE_CLASSES:
            raise ValueError(f"{where}: phase_classes[{phase!r}] is {klass!r}; "
                             f"a phase class is one of {', '.join(PHASE_CLASSES)}")
        if states is not None and phase not in states:
            raise ValueError(f"{where}: phase_classes names {phase!r}, which is not a state of its state machine")


def load(path: str, origin: str = "OPSCONSOLE_RECONCILERS") -> Reconciler:
    """Import `package.module.ClassName` (or `package.module:ClassName`) and instantiate it; ImportError or
    TypeError say what is wrong and where the name came from."""
    return _reconciler_class(path, origin)()


def sources() -> list[KindSource]:
    """Every configured kind name with where it came from, in registration order (duplicates included)."""
    found: list[KindSource] = []
    if getattr(settings, "OPSCONSOLE_BUILTIN_KINDS", True):
        found += [KindSource(p, "builtin") for p in BUILTIN]
    if getattr(settings, "OPSCONSOLE_KIND_ENTRY_POINTS", True):
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "?"
            found.append(KindSource(ep.value, f"entry point {ep.name!r} of {dist}"))
    found += [KindSource(p, "OPSCONSOLE_RECONCILERS") for p in getattr(settings, "OPSCONSOLE_RECONCILERS", ())]
    return found


def _cache_key() -> tuple[object, ...]:
    return (
        bool(getattr(settings, "OPSCONSOLE_BUILTIN_KINDS", True)),
        bool(getattr(settings, "OPSCONSOLE_KIND_ENTRY_POINTS", True)),
        tuple(getattr(settings, "OPSCONSOLE_RECONCILERS", ())),
    )


def _build() -> list[Reconciler]:
    instances: list[Reconciler] = []
    classes: dict[type[Reconciler], str] = {}
    seen: dict[tuple[str, str], str] = {}
    for source in sources():
        cls = _reconciler_class(source.path, source.origin)
        if cls in classes:
            continue
        res = (cls.resource.group, cls.resource.plural)
        where = f"{source.path} ({source.origin})"
        if res in seen:
            raise ValueError(f"{where} and {seen[res]} both reconcile {res[1]}.{res[0]}")
        seen[res] = where
        classes[cls] = where
        instances.append(cls())
    return instances


def registered() -> list[Reconciler]:
    """One instance of every registered kind's reconciler, in registration order (rebuilt when the settings
    change)."""
    global _loaded
    key = _cache_key()
    with _lock:
        if _loaded is None or _loaded[0] != key:
            _loaded = (key, _build())
        return list(_loaded[1])


def for_kind(group: str, plural: str) -> Reconciler:
    """The reconciler of resource `plural` in API group `group`; UnknownKind when none is registered."""
    for rec in registered():
        if rec.resource.group == group and rec.resource.plural == plural:
            return rec
    raise UnknownKind(f"no reconciler registered for {plural}.{group}" if group else f"no reconciler for {plural}")


def for_key(key: str) -> Reconciler:
    """The reconciler of a reconcile key (`group/version/plural/namespace/name`)."""
    req = Request.from_key(key)
    return for_kind(req.group, req.plural)


def for_name(name: str) -> Reconciler:
    """Look a reconciler up the way a user names it on the command line: kind (`Memcached`, `memcached`),
    plural (`memcacheds`), or `plural.group` (`memcacheds.cache.example.com`), case-insensitive."""
    wanted = name.lower()
    for rec in registered():
        r = rec.resource
        if wanted in (r.kind.lower(), r.plural, f"{r.plural}.{r.group}", f"{r.kind.lower()}.{r.group}"):
            return rec
    raise UnknownKind(f"no reconciler registered for {name!r}")


def reset() -> None:
    """Forget the loaded instances (tests that change the settings call this, or rely on the auto-reload)."""
    global _loaded
    with _lock:
        _loaded = None
