"""How the rollout of a workload's current spec stands: `complete`, `progressing` or `failed`, judged by the rules of
`kubectl rollout status` (kubectl's pkg/polymorphichelpers/rollout_status.go), for Deployments, StatefulSets and
DaemonSets.

Every kind that owns a workload judges it with `rollout_status(workload)`: Memcached, the kinds `startkind`
generates and the console's health tree. Ready replicas alone say nothing about the current spec: after an image
change to a tag that cannot be pulled, the old Pods stay ready while the new ReplicaSet's Pod waits in
ImagePullBackOff, so "3/3 ready" would call a broken generation good.

- Deployment: the spec update must be observed (`metadata.generation <= status.observedGeneration`); then a
  `Progressing` condition with reason `ProgressDeadlineExceeded` is a failed rollout; fewer updated replicas than
  `spec.replicas`, old replicas not yet terminated, or fewer available replicas than updated ones are a rollout in
  progress; anything else is complete.
- StatefulSet: `OnDelete` is not judged further than "observed and ready" (its Pods change only when someone
  deletes them); otherwise the update must be observed and every replica ready; with a `rollingUpdate` (the API
  server always defaults one, with partition 0) it is complete once `replicas - partition` Pods are updated; without
  one, once `updateRevision == currentRevision`.
- DaemonSet: `OnDelete` as for a StatefulSet; otherwise observed, every scheduled Pod updated and available.

A StatefulSet or DaemonSet never fails: Kubernetes gives them no progress deadline. Pure: no Django, no API calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

COMPLETE, PROGRESSING, FAILED = "complete", "progressing", "failed"
#: the Deployment controller's reason on the Progressing condition once progressDeadlineSeconds have passed
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
_RANK = {COMPLETE: 0, PROGRESSING: 1, FAILED: 2}


@dataclass(frozen=True)
class Rollout:
    """Where one workload's rollout stands.

    `state` is COMPLETE, PROGRESSING or FAILED; `reason` a CamelCase word (usable as a condition's reason) and
    `message` kubectl's sentence for it. The counts: `desired` replicas (Pods a DaemonSet should schedule),
    `updated` (of the current spec), `ready` (ready Pods of the current spec, at least: Pods of the old spec are
    counted out first, so this never calls an old Pod current) and `total` (every Pod, old ones included)."""

    state: str
    reason: str
    message: str
    desired: int = 0
    updated: int = 0
    ready: int = 0
    total: int = 0
    kind: str = ""
    name: str = ""

    @property
    def complete(self) -> bool:
        """Every replica of the current spec is rolled out."""
        return self.state == COMPLETE

    @property
    def failed(self) -> bool:
        """The rollout will not finish by itself (a Deployment's progress deadline passed)."""
        return self.state == FAILED

    @property
    def count(self) -> str:
        """"n/m ready": ready replicas of the current spec out of those desired."""
        return f"{self.ready}/{self.desired} ready"


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _current_ready(ready: int, updated: int, total: int) -> int:
    """Ready Pods of the current spec, at least: the Pods of older specs (total - updated) counted as ready first."""
    return max(0, min(updated, ready - max(0, total - updated)))


def _observed(meta: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return _int(meta.get("generation")) <= _int(status.get("observedGeneration"))


def _deployment(obj: Mapping[str, Any]) -> Rollout:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = _int(spec.get("replicas"), 1)
    updated, total = _int(status.get("updatedReplicas")), _int(status.get("replicas"))
    available = _int(status.get("availableReplicas"))
    counts = {"desired": desired, "updated": updated, "total": total, "kind": "Deployment",
              "name": str(meta.get("name") or ""),
              "ready": _current_ready(min(available, _int(status.get("readyReplicas"), available)), updated, total)}
    if not _observed(meta, status):
        return Rollout(PROGRESSING, "SpecUpdateNotObserved", "waiting for the spec update to be observed", **counts)
    progressing = next((c for c in status.get("conditions") or []
                        if isinstance(c, Mapping) and c.get("type") == "Progressing"), None)
    if progressing is not None and progressing.get("reason") == PROGRESS_DEADLINE_EXCEEDED:
        return Rollout(FAILED, PROGRESS_DEADLINE_EXCEEDED, "exceeded its progress deadline"
                       + (f": {progressing['message']}" if progressing.get("message") else ""), **counts)
    if updated < desired:
        return Rollout(PROGRESSING, "ReplicasNotUpdated", f"{updated} out of {desired} new replicas have been updated",
                       **counts)
    if total > updated:
        return Rollout(PROGRESSING, "OldReplicasPendingTermination",
                       f"{total - updated} old replicas are pending termination", **counts)
    if available < updated:
        return Rollout(PROGRESSING, "UpdatedReplicasUnavailable",
                       f"{available} of {updated} updated replicas are available", **counts)
    return Rollout(COMPLETE, "RolledOut", "successfully rolled out", **counts)


def _strategy(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return spec.get("updateStrategy") or {}


def _statefulset(obj: Mapping[str, Any]) -> Rollout:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = _int(spec.get("replicas"), 1)
    ready, updated = _int(status.get("readyReplicas")), _int(status.get("updatedReplicas"))
    total = _int(status.get("replicas"))
    counts = {"desired": desired, "updated": updated, "total": total, "kind": "StatefulSet",
              "name": str(meta.get("name") or ""), "ready": _current_ready(ready, updated, total)}
    strategy = _strategy(spec)
    if _int(status.get("observedGeneration")) == 0 or not _observed(meta, status):
        return Rollout(PROGRESSING, "SpecUpdateNotObserved", "waiting for the spec update to be observed", **counts)
    if ready < desired:
        return Rollout(PROGRESSING, "ReplicasNotReady", f"waiting for {desired - ready} pods to be ready", **counts)
    if strategy.get("type", "RollingUpdate") == "OnDelete":
        return Rollout(COMPLETE, "OnDelete", "updateStrategy OnDelete: pods change only when deleted, not judged",
                       **{**counts, "ready": min(ready, desired)})
    rolling = strategy.get("rollingUpdate")
    if isinstance(rolling, Mapping):
        partition = _int(rolling.get("partition"))
        if updated < desired - partition:
            return Rollout(PROGRESSING, "PartitionNotUpdated",
                           f"{updated} out of {desired - partition} new pods have been updated (partition {partition})",
                           **counts)
        return Rollout(COMPLETE, "RolledOut", f"partitioned roll out complete: {updated} new pods have been updated",
                       **counts)
    update_revision = str(status.get("updateRevision") or "")
    if update_revision != str(status.get("currentRevision") or ""):
        return Rollout(PROGRESSING, "RevisionNotUpdated",
                       f"{updated} pods at revision {update_revision}, waiting for the rolling update to complete",
                       **counts)
    return Rollout(COMPLETE, "RolledOut", f"rolling update complete: {desired} pods at revision {update_revision}",
                   **{**counts, "ready": min(ready, desired)})


def _daemonset(obj: Mapping[str, Any]) -> Rollout:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = _int(status.get("desiredNumberScheduled"))
    updated, available = _int(status.get("updatedNumberScheduled")), _int(status.get("numberAvailable"))
    total = _int(status.get("currentNumberScheduled"))
    counts = {"desired": desired, "updated": updated, "total": total, "kind": "DaemonSet",
              "name": str(meta.get("name") or ""),
              "ready": _current_ready(min(available, _int(status.get("numberReady"), available)), updated, total)}
    if not _observed(meta, status):
        return Rollout(PROGRESSING, "SpecUpdateNotObserved", "waiting for the spec update to be observed", **counts)
    if _strategy(spec).get("type", "RollingUpdate") == "OnDelete":
        ready = _int(status.get("numberReady"))
        state = COMPLETE if ready >= desired else PROGRESSING
        return Rollout(state, "OnDelete", "updateStrategy OnDelete: pods change only when deleted, not judged",
                       **{**counts, "ready": min(ready, desired)})
    if updated < desired:
        return Rollout(PROGRESSING, "PodsNotUpdated", f"{updated} out of {desired} new pods have been updated",
                       **counts)
    if available < desired:
        return Rollout(PROGRESSING, "UpdatedPodsUnavailable", f"{available} of {desired} updated pods are available",
                       **counts)
    return Rollout(COMPLETE, "RolledOut", "successfully rolled out", **counts)


_JUDGES = {"Deployment": _deployment, "StatefulSet": _statefulset, "DaemonSet": _daemonset}
WORKLOAD_KINDS = frozenset(_JUDGES)


def rollout_status(workload: Mapping[str, Any]) -> Rollout:
    """Where the rollout of `workload`'s current spec stands (a Deployment, StatefulSet or DaemonSet of group
    apps, as the API returns it); ValueError for any other kind."""
    kind = str(workload.get("kind") or "")
    api_version = str(workload.get("apiVersion") or "apps/v1")
    if kind not in _JUDGES or not api_version.startswith("apps/"):
        raise ValueError(f"no rollout rules for {api_version} {kind or '(no kind)'}")
    return _JUDGES[kind](workload)


def worst(rollouts: Iterable[Rollout]) -> Rollout:
    """Of several workloads' rollouts, the one furthest from complete (failed, then progressing; the first of
    equals), with `ready` the fewest ready of any; a complete Rollout with no counts when there are none."""
    items = list(rollouts)
    if not items:
        return Rollout(COMPLETE, "RolledOut", "no workloads")
    pick = max(items, key=lambda r: _RANK[r.state])
    fewest = min(items, key=lambda r: r.ready)
    return Rollout(pick.state, pick.reason, pick.message, pick.desired, pick.updated, fewest.ready, pick.total,
                   pick.kind, pick.name)
