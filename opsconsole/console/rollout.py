"""The rollout view of a stateful kind's ordered upgrade, from the status its reconciler mirrors: per ordinal the
Pod's revision, readiness and zone, the budget (allowed disruptions), where the upgrade is and why it is blocked.

A kind qualifies when its status carries `ordinals` and `partition` (KVStore, and the kinds `startkind --owns
apps/v1/StatefulSet` generates); any other resource has no rollout view. Pure: it reads the Resource row only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconcilers.models import Resource


@dataclass(frozen=True)
class OrdinalRow:
    """One ordinal: its Pod, revision (and whether it is the update revision), readiness, zone, node, and whether
    the upgrade stands at it (the ordinal at the partition while the upgrade runs)."""

    ordinal: int
    pod: str
    revision: str
    updated: bool
    ready: bool
    zone: str
    node: str
    unschedulable: str
    at_partition: bool


@dataclass(frozen=True)
class RolloutView:
    """Where one resource's ordered upgrade stands."""

    ordinals: list[OrdinalRow]
    partition: int
    replicas: int
    update_revision: str
    current_revision: str
    disruptions_allowed: int
    min_available: Any
    upgrading: bool
    where: str
    blocked_reason: str
    blocked_message: str


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _span(low: int, high: int) -> str:
    return f"ordinal {low}" if low == high else f"ordinals {low}..{high}"


def _where(partition: int, replicas: int, rows: list[OrdinalRow], upgrading: bool) -> str:
    if not upgrading:
        return "no upgrade in progress: every ordinal runs the current revision" if all(
            r.updated or not r.revision for r in rows) else "no upgrade in progress"
    if partition >= replicas:
        return f"upgrade started: ordinal {replicas - 1} moves first"
    moved = rows[partition] if partition < len(rows) else None
    if moved is not None and not (moved.updated and moved.ready):
        return f"ordinal {partition} ({moved.pod}) is being replaced; {_span(partition, replicas - 1)} moved"
    if partition == 0:
        return "every ordinal moved: finishing"
    return f"{_span(partition, replicas - 1)} upgraded; ordinal {partition - 1} moves next"


def resource_rollout(resource: Resource) -> RolloutView | None:
    """The rollout view of `resource`, or None when its status has no ordinals and partition."""
    status = resource.status if isinstance(resource.status, dict) else {}
    ordinals = status.get("ordinals")
    if not isinstance(ordinals, list) or "partition" not in status:
        return None
    spec = resource.spec if isinstance(resource.spec, dict) else {}
    replicas = _int(spec.get("replicas"), len(ordinals))
    partition = _int(status.get("partition"))
    upgrading = resource.phase in ("Upgrading", "Replacing", "Blocked") or 0 < partition
    rows = [OrdinalRow(_int(o.get("ordinal")), str(o.get("pod") or ""), str(o.get("revision") or ""),
                       bool(o.get("updated")), bool(o.get("ready")), str(o.get("zone") or ""), str(o.get("node") or ""),
                       str(o.get("unschedulable") or ""), upgrading and _int(o.get("ordinal")) == partition)
            for o in ordinals if isinstance(o, dict)]
    blocked = resource.phase == "Blocked"
    return RolloutView(rows, partition, replicas, str(status.get("updateRevision") or ""),
                       str(status.get("currentRevision") or ""), _int(status.get("disruptionsAllowed")),
                       spec.get("minAvailable"), upgrading, _where(partition, replicas, rows, upgrading),
                       resource.reason if blocked else "", resource.message if blocked else "")
