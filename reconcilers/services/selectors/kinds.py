"""Reads of the registered reconcilers: each one's kind, resource and state machine (with each state's
semantic class), and the phase → class map the console's badges colour by."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import apiclient, kube, registry

log = logging.getLogger(__name__)
CRD_KIND = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
DEFAULT_COLUMNS: tuple[dict[str, Any], ...] = (
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 0},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 0},
)
_columns: dict[tuple[str, str], tuple[float, list[dict[str, Any]]]] = {}
_columns_lock = threading.Lock()


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
            "state_machine": rec.state_machine.as_dict() | {
                "classes": {state: rec.phase_class(state) for state in rec.state_machine.states}},
        })
    return out


_class_map: tuple[tuple[tuple[type, int], ...], dict[str, str]] | None = None


def phase_class_map() -> dict[str, str]:
    """Every registered kind's phases with their semantic class (ready, progressing, warning, failed,
    terminal): the first kind in registration order wins when two kinds class one phase differently. Rebuilt
    only when the registered kinds change (the badges ask for it once per phase shown)."""
    global _class_map
    regs = registry.registered()
    key = tuple((type(rec), id(rec)) for rec in regs)
    cached = _class_map
    if cached is not None and cached[0] == key:
        return cached[1]
    out: dict[str, str] = {}
    for rec in regs:
        for state in rec.state_machine.states:
            out.setdefault(state, rec.phase_class(state))
    _class_map = (key, out)
    return out


def kind_printer_columns(group: str, plural: str, version: str, *, ttl: float = 60.0) -> list[dict[str, Any]]:
    """The CRD's `additionalPrinterColumns` for `version` (name, type, jsonPath, priority, description), read
    from the cluster and memoised `ttl` s per process; Phase and Age when the CRD cannot be read."""
    now = time.monotonic()
    with _columns_lock:
        hit = _columns.get((group, plural))
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
    columns = [dict(c) for c in DEFAULT_COLUMNS]
    try:
        crd = kube.get_object(apiclient.get_api_client(), CRD_KIND, None, f"{plural}.{group}", timeout=(1.0, 2.0))
        for v in ((crd or {}).get("spec") or {}).get("versions") or []:
            if v.get("name") == version and v.get("additionalPrinterColumns"):
                columns = [{"name": c.get("name", ""), "type": c.get("type", "string"),
                            "jsonPath": c.get("jsonPath", ""), "priority": int(c.get("priority") or 0),
                            "description": c.get("description", "")} for c in v["additionalPrinterColumns"]]
    except Exception as exc:  # a read for display: the default columns then
        log.info("printer columns of %s.%s not read: %s", plural, group, exc)
    with _columns_lock:
        _columns[(group, plural)] = (time.monotonic(), columns)
    return columns
