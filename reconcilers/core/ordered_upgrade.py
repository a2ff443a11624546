"""The ordered upgrade of a StatefulSet: one ordinal at a time from the highest, gated by its PodDisruptionBudget
and its zone spread. Pure (no Django, no API calls): a kind reads the StatefulSet, its Pods, its PDB and the Nodes,
and `plan_upgrade` says what the next step is.

The partition on the live StatefulSet is the truth of where an upgrade stands (never a reconciler's memory): the
ordinals at or above it run the new template, those below the old one. One step lowers it by one, only when

- every ordinal at or above it is on the new revision and Ready (`rollout_status`, the shared rollout judgement
  of `reconcilers.core.rollout`, says the partitioned rollout is complete), and the zone spread still holds;
- the PodDisruptionBudget allows a disruption: its `status.disruptionsAllowed` > 0, and the Ready Pods counted here
  say so too (a PDB whose status lags a Pod that just became unready is never trusted over the Pods).

What cannot proceed is `blocked`, with a reason naming why: `BudgetExhausted` (no disruption allowed),
`SpreadUnsatisfiable` (the moved ordinal's Pod is Pending: the scheduler's own message; or the Ready Pods are
spread wider than maxSkew), `ProgressDeadlineExceeded` (the moved ordinal's Pod not Ready within the deadline).
A blocked upgrade resumes by itself: each reconcile plans again from the live objects.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcilers.core.rollout import rollout_status

ZONE_KEY = "topology.kubernetes.io/zone"
REVISION_LABEL = "controller-revision-hash"

# what plan_upgrade says to do
DONE = "done"  # partition 0 and every ordinal on the new revision and Ready
STEP = "step"  # lower the partition to `partition` (the ordinal moved)
WAIT = "wait"  # a moved ordinal is being replaced (or a status lags): look again soon
VERIFIED = "verified"  # the ordinals moved so far are Ready on the new revision; the next step is the next run's
BLOCKED = "blocked"

BUDGET_EXHAUSTED = "BudgetExhausted"
SPREAD_UNSATISFIABLE = "SpreadUnsatisfiable"
DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"


def min_available_count(min_available: int | str, replicas: int) -> int:
    """Pods that must stay Ready: a number as it is, a percentage of `replicas` rounded up (the disruption
    controller's rule); ValueError for anything else."""
    if isinstance(min_available, bool):
        raise ValueError("minAvailable must be a number or a percentage")
    if isinstance(min_available, int):
        return min_available
    text = str(min_available).strip()
    if not text.endswith("%") or not text[:-1].isdigit():
        raise ValueError(f"minAvailable must be a number or a percentage such as '80%', not {min_available!r}")
    return math.ceil(int(text[:-1]) * replicas / 100)


def budget_problem(min_available: int | str, replicas: int) -> str | None:
    """Why a budget can never be met while upgrading one Pod at a time (minAvailable ≥ replicas: no Pod may ever
    be disrupted), or None when it can."""
    try:
        needed = min_available_count(min_available, replicas)
    except ValueError as exc:
        return str(exc)
    if replicas > 0 and needed >= replicas:
        return (f"minAvailable {min_available} keeps {needed} of {replicas} Pods Ready at all times: no Pod may ever "
                f"be disrupted, so an upgrade could never proceed (minAvailable must be below replicas)")
    return None


@dataclass(frozen=True)
class OrdinalState:
    """One ordinal of the StatefulSet as the console shows it."""

    ordinal: int
    pod: str
    exists: bool = False
    revision: str = ""
    updated: bool = False
    ready: bool = False
    terminating: bool = False
    zone: str = ""
    node: str = ""
    unschedulable: str = ""  # the scheduler's message while the Pod is Pending and unschedulable

    def as_status(self) -> dict[str, Any]:
        """The ordinal as a status entry (camelCase)."""
        return {"ordinal": self.ordinal, "pod": self.pod, "revision": self.revision, "updated": self.updated,
                "ready": self.ready, "zone": self.zone, "node": self.node,
                **({"unschedulable": self.unschedulable} if self.unschedulable else {})}


@dataclass(frozen=True)
class UpgradePlan:
    """What to do next: `action` (DONE, STEP, WAIT, VERIFIED, BLOCKED), the `partition` to apply (the live one
    unless STEP), the `ordinal` it concerns (the one moved or being replaced; None when none), and a CamelCase
    `reason` with a `message`."""

    action: str
    partition: int
    ordinal: int | None
    reason: str
    message: str
    ordinals: tuple[OrdinalState, ...] = field(default=())
    disruptions_allowed: int = 0


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def partition_of(sts: Mapping[str, Any]) -> int:
    """The live StatefulSet's `spec.updateStrategy.rollingUpdate.partition` (0 when unset)."""
    strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
    return _int((strategy.get("rollingUpdate") or {}).get("partition"))


def _ready(pod: Mapping[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _unschedulable(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "", "Pending"):
        return ""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                and cond.get("reason") == "Unschedulable":
            return str(cond.get("message") or "unschedulable")
    return ""


def ordinal_states(sts: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
                   topology_key: str = ZONE_KEY) -> tuple[OrdinalState, ...]:
    """Each ordinal 0..replicas-1 of `sts`: its Pod's revision (and whether it is the update revision),
    readiness, node and zone (the node's `topology_key` label), or `exists=False` when it has no Pod."""
    name = str((sts.get("metadata") or {}).get("name") or "")
    replicas = _int((sts.get("spec") or {}).get("replicas"), 1)
    update_revision = str((sts.get("status") or {}).get("updateRevision") or "")
    zone_of = {str((n.get("metadata") or {}).get("name")): str(((n.get("metadata") or {}).get("labels") or {})
                                                                   .get(topology_key) or "") for n in nodes}
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    out = []
    for i in range(replicas):
        pod_name = f"{name}-{i}"
        pod = by_name.get(pod_name)
        if pod is None:
            out.append(OrdinalState(i, pod_name))
            continue
        meta = pod.get("metadata") or {}
        revision = str((meta.get("labels") or {}).get(REVISION_LABEL) or "")
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        out.append(OrdinalState(i, pod_name, True, revision, bool(update_revision) and revision == update_revision,
                                _ready(pod) and not meta.get("deletionTimestamp"), bool(meta.get("deletionTimestamp")),
                                zone_of.get(node, ""), node, _unschedulable(pod)))
    return tuple(out)


def spread_problem(states: Iterable[OrdinalState], nodes: Iterable[Mapping[str, Any]], max_skew: int,
                   topology_key: str = ZONE_KEY) -> str | None:
    """Why the Ready Pods are not spread within `max_skew` over the zones the schedulable Nodes offer (the
    difference between the most and the fewest Pods in a zone), or None when they are."""
    zones = {str(((n.get("metadata") or {}).get("labels") or {}).get(topology_key) or "") for n in nodes
             if not (n.get("spec") or {}).get("unschedulable")}
    zones.discard("")
    if not zones:
        return None
    counts = dict.fromkeys(sorted(zones), 0)
    for state in states:
        if state.ready and state.zone in counts:
            counts[state.zone] += 1
    skew = max(counts.values()) - min(counts.values())
    if skew > max_skew:
        spread = ", ".join(f"{zone}: {n}" for zone, n in counts.items())
        return f"Ready Pods per {topology_key} ({spread}) differ by {skew}, more than maxSkew {max_skew}"
    return None


def _budget(pdb: Mapping[str, Any] | None, states: tuple[OrdinalState, ...], needed: int) -> tuple[int, int, str]:
    """(the PDB's disruptionsAllowed, the disruptions the Ready Pods allow, a sentence on both)."""
    ready = sum(1 for s in states if s.ready)
    own = max(0, ready - needed)
    status = (pdb or {}).get("status") or {}
    observed = pdb is not None and _int((pdb.get("metadata") or {}).get("generation"), 1) <= _int(
        status.get("observedGeneration"), 0)
    allowed = _int(status.get("disruptionsAllowed")) if observed else 0
    name = str(((pdb or {}).get("metadata") or {}).get("name") or "(none)")
    unready = [s.pod for s in states if not s.ready]
    text = (f"PodDisruptionBudget {name} allows {allowed} disruption{'s' if allowed != 1 else ''} "
            f"({ready} Ready, {needed} must stay Ready)" + (f"; not Ready: {', '.join(unready)}" if unready else ""))
    return allowed, own, text


def plan_upgrade(sts: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], pdb: Mapping[str, Any] | None,
                 nodes: Iterable[Mapping[str, Any]], *, min_available: int | str, max_skew: int = 1,
                 topology_key: str = ZONE_KEY, verified: bool = False, step_elapsed: float = 0.0,
                 deadline: float = 600.0) -> UpgradePlan:
    """The next step of the upgrade `sts` (its template already the new one) stands at, from the live objects.

    `verified`: whether the record already says the ordinals moved so far were verified (the phase between
    steps), so that verifying an ordinal and moving the next one are two steps on record; `step_elapsed`: seconds
    since the ordinal at the partition was moved (for the progress deadline)."""
    nodes = list(nodes)
    states = ordinal_states(sts, pods, nodes, topology_key)
    replicas = len(states)
    partition = min(partition_of(sts), replicas)
    needed = min_available_count(min_available, replicas)
    allowed, own, budget_text = _budget(pdb, states, needed)
    rollout = rollout_status(sts)

    def plan(action: str, ordinal: int | None, reason: str, message: str, to: int = partition) -> UpgradePlan:
        return UpgradePlan(action, to, ordinal, reason, message, states, allowed)

    if rollout.reason == "SpecUpdateNotObserved":
        return plan(WAIT, None, rollout.reason, rollout.message)
    # the ordinals moved so far (old Pods below the partition are the budget's business, not the step's)
    pending = [s for s in states if s.ordinal >= partition and not (s.updated and s.ready)]
    if pending:
        current = pending[-1]  # the lowest: the ordinal moved last
        if current.unschedulable:
            return plan(BLOCKED, current.ordinal, SPREAD_UNSATISFIABLE, f"{current.pod} cannot be scheduled: "
                        f"{current.unschedulable}")
        if sum(1 for s in states if s.ready) < needed:  # another Pod went: fewer Ready than the budget keeps
            return plan(BLOCKED, current.ordinal, BUDGET_EXHAUSTED, f"ordinal {current.ordinal} in flight with fewer "
                        f"Pods Ready than the budget keeps: {budget_text}")
        if step_elapsed >= deadline:
            return plan(BLOCKED, current.ordinal, DEADLINE_EXCEEDED, f"{current.pod} not Ready on the new "
                        f"revision within {deadline:g}s")
        return plan(WAIT, current.ordinal, "OrdinalMoved",
                    f"ordinal {current.ordinal}: waiting for {current.pod} to be Ready on the new revision")
    spread = spread_problem(states, nodes, max_skew, topology_key)
    if spread is not None:
        return plan(BLOCKED, partition if partition < replicas else None, SPREAD_UNSATISFIABLE, spread)
    if partition == 0:
        if not rollout.complete:  # the StatefulSet's status lags its Pods
            return plan(WAIT, 0, rollout.reason, rollout.message)
        return plan(DONE, None, "UpgradeComplete", f"all {replicas} ordinals Ready on the new revision")
    if not verified and partition < replicas:
        done = states[partition]
        return plan(VERIFIED, partition, "OrdinalUpgraded",
                    f"ordinal {partition}: {done.pod} Ready on the new revision"
                    + (f" in {done.zone}" if done.zone else ""))
    if own <= 0:
        return plan(BLOCKED, partition - 1, BUDGET_EXHAUSTED, budget_text)
    if allowed <= 0:  # the Pods allow it but the PDB's status has not caught up yet
        return plan(WAIT, partition - 1, "BudgetStatusLagging", f"waiting for the PDB's status: {budget_text}")
    target = partition - 1
    return plan(STEP, target, "OrdinalMoved", f"ordinal {target}: partition {partition} -> {target} "
                f"({states[target].pod} replaced; {budget_text})", to=target)
