"""Shared helpers for the workload controllers: template hashes, pod construction, pod readiness."""

from __future__ import annotations

import functools
import json
import math
from typing import Any

from kubesim.meta import clone, now

_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def fnv32a(data: bytes) -> int:
    """FNV-1a, 32 bit (what the deployment controller hashes pod templates with)."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def template_hash(template: dict[str, Any], collision_count: int = 0) -> str:
    """A pod-template-hash / controller-revision-hash in the apiserver's alphabet."""
    raw = json.dumps(template, sort_keys=True, separators=(",", ":")).encode() + str(collision_count).encode()
    return _hash_of(raw)


@functools.lru_cache(maxsize=4096)
def _hash_of(raw: bytes) -> str:
    """The hash of one template's canonical bytes, remembered: every sync of a workload asks again, and hashing
    byte by byte in Python cost more than the rest of the sync."""
    return "".join(_SAFE[int(c) % len(_SAFE)] for c in str(fnv32a(raw)))


def strip_hash_label(template: dict[str, Any], label: str) -> dict[str, Any]:
    """A template without one label (to compare templates across ReplicaSets)."""
    t = clone(template)
    labels = (t.get("metadata") or {}).get("labels")
    if labels and label in labels:
        del labels[label]
    return t


def is_pod_ready(pod: dict[str, Any]) -> bool:
    """Ready condition True."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def is_pod_active(pod: dict[str, Any]) -> bool:
    """Not terminating and not finished (what ReplicaSets count)."""
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def resolve_int_or_percent(value: Any, total: int, round_up: bool) -> int:
    """maxSurge / maxUnavailable: an int, or a percentage of ``total``."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = int(value[:-1])
        except ValueError:
            return 0
        v = pct * total / 100
        return math.ceil(v) if round_up else math.floor(v)
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def pod_from_template(template: dict[str, Any], name: str, namespace: str, owner_ref: dict[str, Any],
                      extra_labels: dict[str, str] | None = None, hostname: str | None = None) -> dict[str, Any]:
    """A Pod body created from a pod template."""
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    labels.update(extra_labels or {})
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner_ref]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    spec = clone(template.get("spec") or {})
    if hostname:
        spec.setdefault("hostname", hostname)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def condition(ctype: str, status: str, reason: str, message: str, stamp: str,
              previous: list[dict[str, Any]] | None = None, update_time: bool = True) -> dict[str, Any]:
    """A Deployment-style condition, keeping lastTransitionTime when the status did not change."""
    prev = next((c for c in previous or [] if c.get("type") == ctype), None)
    transition = prev["lastTransitionTime"] if prev and prev.get("status") == status else stamp
    last_update = stamp if update_time or not prev else prev.get("lastUpdateTime", stamp)
    if prev and prev.get("status") == status and prev.get("reason") == reason and prev.get("message") == message \
            and not update_time:
        last_update = prev.get("lastUpdateTime", stamp)
    return {"type": ctype, "status": status, "lastUpdateTime": last_update, "lastTransitionTime": transition,
            "reason": reason, "message": message}


def set_pod_condition(conds: list[dict[str, Any]] | None, ctype: str, status: str, reason: str | None = None,
                  message: str | None = None) -> list[dict[str, Any]]:
    """Pod conditions with one set (lastTransitionTime moves only when the status changes)."""
    out = [dict(c) for c in conds or []]
    for c in out:
        if c["type"] == ctype:
            if c["status"] != status:
                c["lastTransitionTime"] = now()
            c["status"] = status
            c.pop("reason", None)
            c.pop("message", None)
            if reason:
                c["reason"] = reason
            if message:
                c["message"] = message
            return out
    c = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": now()}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    out.append(c)
    return out
