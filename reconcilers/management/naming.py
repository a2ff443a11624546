"""How the shell commands name an object: a kind (as `registry.for_name` reads it: Memcached, memcached, memcacheds
or memcacheds.cache.example.com), then `<namespace>/<name>`, or `<name>` for a cluster-scoped kind
(`manage.py reconcile` and the healing commands)."""

from __future__ import annotations

from django.core.management.base import CommandError

from reconcilers.core.types import Request
from reconcilers.engine import registry


def named_request(kind_name: str, target: str) -> Request:
    """The Request (in the default cluster) of the object `target` of the kind `kind_name`; CommandError naming
    the registered kinds, or what the target lacks or has too much of."""
    try:
        reconciler = registry.for_name(kind_name)
    except registry.UnknownKind as exc:
        known = ", ".join(r.resource.kind for r in registry.registered())
        raise CommandError(f"{exc} (registered: {known or 'none'})") from exc
    kind = reconciler.resource
    namespace, _, name = target.rpartition("/")
    if kind.namespaced and not namespace:
        raise CommandError(f"{kind.kind} is namespaced: give <namespace>/<name>")
    if not kind.namespaced and namespace:
        raise CommandError(f"{kind.kind} is cluster-scoped: give just <name>")
    return kind.request(namespace, name)
