"""Reads of the registered reconcilers: each one's kind, resource and state machine."""

from __future__ import annotations

from typing import Any

from reconcilers.engine import registry


def kind_list() -> list[dict[str, Any]]:
    """One entry per registered reconciler, in settings order."""
    out = []
    for rec in registry.registered():
        r = rec.resource
        out.append({
            "kind": r.kind,
            "group": r.group,
            "version": r.version,
            "plural": r.plural,
            "api_version": r.api_version,
            "namespaced": r.namespaced,
            "controller": rec.name,
            "reconciler": f"{type(rec).__module__}.{type(rec).__qualname__}",
            "finalizer": rec.finalizer or "",
            "owns": [{"api_version": o.api_version, "kind": o.kind, "plural": o.plural} for o in rec.owns],
            "state_machine": rec.state_machine.as_dict(),
        })
    return out
