"""An object's kstatus-like health, as the health tree and the object page show it: `Current`, `InProgress` or
`Failed`, with a message, a ready count and, for a Pod, the waiting reason of a container. Workloads are judged by
`reconcilers.core.rollout` (kubectl rollout status' rules), ReplicaSets, Pods and Services by their own rules, any
other object by kstatus's generic conditions (`object_health` picks by kind).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconcilers.core.rollout import COMPLETE, rollout_status
from reconcilers.core.rollout import FAILED as FAILED_ROLLOUT

CURRENT, IN_PROGRESS, FAILED = "Current", "InProgress", "Failed"
#: container waiting reasons that will not clear by themselves (the Pod is Failed until its spec changes)
FAILED_WAITING = frozenset({
    "ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff", "InvalidImageName", "ErrImageNeverPull",
    "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
})


@dataclass(frozen=True)
class Health:
    """An object's health: status (Current / InProgress / Failed), a message, a ready count ("2/3 ready") and,
    for a Pod, the waiting reason of its first waiting container."""

    status: str
    message: str = ""
    ready: str = ""
    reason: str = ""


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or [] if isinstance(c, dict)}


def _generation_behind(obj: dict[str, Any]) -> bool:
    generation = (obj.get("metadata") or {}).get("generation")
    observed = (obj.get("status") or {}).get("observedGeneration")
    return generation is not None and observed is not None and int(observed) < int(generation)


def workload_health(obj: dict[str, Any]) -> Health:
    """A Deployment, StatefulSet or DaemonSet, judged by `reconcilers.core.rollout.rollout_status` (kubectl
    rollout status' rules, the judgement the kinds use): Failed when the rollout failed (a Deployment's
    ProgressDeadlineExceeded), InProgress while it progresses, Current once complete; the count is the ready
    replicas of the current spec ("1/3 ready" while old replicas still serve)."""
    rollout = rollout_status(obj)
    status = {COMPLETE: CURRENT, FAILED_ROLLOUT: FAILED}.get(rollout.state, IN_PROGRESS)
    reason = rollout.reason if rollout.state != COMPLETE else ""
    return Health(status, rollout.message, rollout.count, reason)


def replicaset_health(obj: dict[str, Any]) -> Health:
    """A ReplicaSet: Failed on ReplicaFailure, InProgress until its replicas are ready and available."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    ready = int(status.get("readyReplicas") or 0)
    count = f"{ready}/{desired} ready"
    failure = _conditions(obj).get("ReplicaFailure") or {}
    if failure.get("status") == "True":
        return Health(FAILED, failure.get("message") or "replica failure", count, failure.get("reason", ""))
    if _generation_behind(obj):
        return Health(IN_PROGRESS, "the new generation is not observed yet", count)
    if ready < desired or int(status.get("availableReplicas") or 0) < desired:
        return Health(IN_PROGRESS, f"{ready} of {desired} replicas ready", count)
    return Health(CURRENT, "all replicas ready", count)


def _waiting(statuses: list[dict[str, Any]]) -> tuple[str, str]:
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return waiting["reason"], waiting.get("message") or ""
    return "", ""


def pod_health(obj: dict[str, Any]) -> Health:
    """A Pod: Current when Succeeded, or Running with the Ready condition True; Failed when its phase is Failed or
    a container waits for a reason that will not clear by itself (ImagePullBackOff, ErrImagePull,
    CrashLoopBackOff, …: FAILED_WAITING); InProgress otherwise (scheduling, pulling, starting, not ready)."""
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    init = [c for c in status.get("initContainerStatuses") or [] if isinstance(c, dict)]
    total = len(containers) or len((obj.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in containers if c.get("ready"))
    count = f"{ready}/{total} ready"
    reason, message = _waiting(init + containers)
    if phase == "Succeeded":
        return Health(CURRENT, "completed", count)
    if phase == "Failed":
        return Health(FAILED, status.get("message") or "the pod failed", count, reason or status.get("reason", ""))
    if reason in FAILED_WAITING:
        return Health(FAILED, message or f"a container is waiting: {reason}", count, reason)
    ready_cond = _conditions(obj).get("Ready") or {}
    if phase == "Running" and ready_cond.get("status") == "True":
        return Health(CURRENT, "running and ready", count)
    if reason:
        return Health(IN_PROGRESS, message or f"a container is waiting: {reason}", count, reason)
    return Health(IN_PROGRESS, f"{phase}: {ready} of {total} containers ready", count)


def service_health(obj: dict[str, Any]) -> Health:
    """A Service: InProgress while a LoadBalancer has no ingress yet, Current otherwise."""
    if (obj.get("spec") or {}).get("type") == "LoadBalancer":
        if not ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress"):
            return Health(IN_PROGRESS, "waiting for the load balancer's address")
    return Health(CURRENT, "service ready")


def generic_health(obj: dict[str, Any]) -> Health:
    """Any other object, by kstatus's generic rules: InProgress while the generation is not observed, Failed when
    Stalled is True, InProgress when Reconciling is True or Ready is False, Current otherwise."""
    conds = _conditions(obj)
    if (conds.get("Stalled") or {}).get("status") == "True":
        c = conds["Stalled"]
        return Health(FAILED, c.get("message") or "stalled", reason=c.get("reason", ""))
    if _generation_behind(obj):
        return Health(IN_PROGRESS, "the new generation is not observed yet")
    if (conds.get("Reconciling") or {}).get("status") == "True":
        c = conds["Reconciling"]
        return Health(IN_PROGRESS, c.get("message") or "reconciling", reason=c.get("reason", ""))
    ready = conds.get("Ready") or {}
    if ready.get("status") == "False":
        return Health(IN_PROGRESS, ready.get("message") or "not ready", reason=ready.get("reason", ""))
    phase = (obj.get("status") or {}).get("phase")
    if phase in ("Failed",):
        return Health(FAILED, f"phase {phase}")
    if phase in ("Pending", "Terminating"):
        return Health(IN_PROGRESS, f"phase {phase}")
    return Health(CURRENT, "")


_BY_KIND = {
    ("apps", "Deployment"): workload_health,
    ("apps", "StatefulSet"): workload_health,
    ("apps", "DaemonSet"): workload_health,
    ("apps", "ReplicaSet"): replicaset_health,
    ("", "Pod"): pod_health,
    ("", "Service"): service_health,
}


def object_health(obj: dict[str, Any]) -> Health:
    """The kstatus-like health of any object (by its apiVersion's group and kind)."""
    api_version = obj.get("apiVersion") or ""
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return _BY_KIND.get((group, obj.get("kind") or ""), generic_health)(obj)
