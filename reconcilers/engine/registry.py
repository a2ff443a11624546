"""The reconcilers this installation runs, loaded by dotted path from `settings.OPSCONSOLE_RECONCILERS`.

Each entry names a `Reconciler` subclass (`package.module.ClassName`); one instance of each is built per
process and looked up by reconcile key or by resource (group, plural). Two reconcilers for one resource
are a configuration error.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.utils.module_loading import import_string

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Request

_lock = threading.Lock()
_loaded: tuple[tuple[str, ...], list[Reconciler]] | None = None


class UnknownKind(LookupError):
    """No registered reconciler handles this resource."""


def load(path: str) -> Reconciler:
    """Import `package.module.ClassName` and instantiate it; ImportError/TypeError say what is wrong."""
    try:
        cls = import_string(path)
    except ImportError as exc:  # not a dotted path, no such module, or no such attribute in it
        raise ImportError(f"OPSCONSOLE_RECONCILERS entry {path!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Reconciler)):
        raise TypeError(f"OPSCONSOLE_RECONCILERS entry {path!r} is not a Reconciler subclass")
    return cls()


def registered() -> list[Reconciler]:
    """One instance of every configured reconciler, in settings order (rebuilt when the setting changes)."""
    global _loaded
    paths = tuple(getattr(settings, "OPSCONSOLE_RECONCILERS", ()))
    with _lock:
        if _loaded is None or _loaded[0] != paths:
            instances = [load(p) for p in paths]
            seen: dict[tuple[str, str], str] = {}
            for path, rec in zip(paths, instances, strict=True):
                res = (rec.resource.group, rec.resource.plural)
                if res in seen:
                    raise ValueError(f"{path} and {seen[res]} both reconcile {res[1]}.{res[0]}")
                seen[res] = path
            _loaded = (paths, instances)
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
    """Forget the loaded instances (tests that change the setting call this, or rely on the auto-reload)."""
    global _loaded
    with _lock:
        _loaded = None
