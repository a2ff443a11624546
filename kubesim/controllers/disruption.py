"""Disruption controller: a PodDisruptionBudget's status from the Pods it selects, as kube-controller-manager does.

expectedPods is the number of selected Pods for an integer minAvailable, else the replicas their controllers
ask for (a Deployment's through its ReplicaSet, a StatefulSet's, a bare ReplicaSet's; an unmanaged Pod counts
one); desiredHealthy is minAvailable (a percentage of expectedPods, rounded up) or expectedPods minus
maxUnavailable (a percentage rounded up); currentHealthy counts Ready Pods not being deleted; disruptionsAllowed
is what is left over, with the DisruptionAllowed condition. The Eviction API (kubesim/cluster/eviction.py) takes
one disruption and records the Pod in ``status.disruptedPods``; such a Pod does not count as healthy until it is
deleted (then it drops out of the map) or two minutes pass, as the real controller's DeletionTimeout.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.controllers.workloads import is_pod_ready, resolve_int_or_percent
from kubesim.meta import now, parse_time
from kubesim.selectors import selector_from_label_selector
from kubesim.store import Event

PDB_KEY = ("policy", "poddisruptionbudgets")
#: seconds an evicted Pod stays in status.disruptedPods waiting to be deleted (the controller's DeletionTimeout)
DELETION_TIMEOUT = 120.0
POD_KEY = ("", "pods")
SCALED = {("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")}


def _selects(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    return selector is not None and selector_from_label_selector(selector)(pod)  # policy/v1: no selector, no Pods


class DisruptionController(Controller):
    """One step per PodDisruptionBudget: count its Pods and write status."""

    name = "disruption"

    def initial_keys(self) -> Iterable[Hashable]:
        return self.object_keys(PDB_KEY)

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == PDB_KEY:
            return [(ev.namespace, ev.obj["metadata"]["name"])]
        if ev.key == POD_KEY or ev.key in SCALED:
            return [(ev.namespace, p["metadata"]["name"]) for p in self.store.items(PDB_KEY, ev.namespace)]
        return ()

    def _controller_of(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        ref = next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
        if ref is None:
            return None
        plural = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "Deployment": "deployments"}.get(
            ref.get("kind", ""))
        if plural is None or not str(ref.get("apiVersion", "")).startswith("apps/"):
            return None
        owner = self.store.get(("apps", plural), obj["metadata"]["namespace"], ref["name"])
        return owner if owner is not None and owner["metadata"]["uid"] == ref.get("uid") else None

    def _expected_scale(self, pods: list[dict[str, Any]]) -> int:
        """The replicas the selected Pods' controllers want (each controller counted once)."""
        scales: dict[str, int] = {}
        unmanaged = 0
        for pod in pods:
            owner = self._controller_of(pod)
            if owner is None:
                unmanaged += 1
                continue
            if owner["kind"] == "ReplicaSet":
                owner = self._controller_of(owner) or owner
            scales[owner["metadata"]["uid"]] = int((owner.get("spec") or {}).get("replicas", 1))
        return sum(scales.values()) + unmanaged

    def sync(self, key: tuple[str, str]) -> float | None:
        ns, name = key
        rt = self.cluster.resource("policy", "poddisruptionbudgets")
        pdb = self.cluster.find(rt, ns, name)
        if pdb is None or pdb["metadata"].get("deletionTimestamp"):
            return None
        spec = pdb.get("spec") or {}
        pods = [p for p in self.store.items(POD_KEY, ns) if _selects(pdb, p)]
        disrupted, recheck = _disrupted_pods(pdb, pods)
        healthy = sum(1 for p in pods if is_pod_ready(p) and not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted)
        min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
        if isinstance(min_available, int):
            expected, desired = len(pods), min_available
        elif min_available is not None:
            expected = self._expected_scale(pods)
            desired = resolve_int_or_percent(min_available, expected, round_up=True)
        elif max_unavailable is not None:
            expected = self._expected_scale(pods)
            desired = max(0, expected - resolve_int_or_percent(max_unavailable, expected, round_up=True))
        else:
            expected, desired = len(pods), 0
        allowed = max(0, healthy - desired)
        old = pdb.get("status") or {}
        prev = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
        state, reason = ("True", "SufficientPods") if allowed else ("False", "InsufficientPods")
        generation = pdb["metadata"].get("generation", 1)
        stamp = prev["lastTransitionTime"] if prev and prev.get("status") == state else now()
        status = {"observedGeneration": generation, "disruptionsAllowed": allowed, "currentHealthy": healthy,
                  "desiredHealthy": desired, "expectedPods": expected,
                  "conditions": [{"type": "DisruptionAllowed", "status": state, "reason": reason, "message": "",
                                  "observedGeneration": generation, "lastTransitionTime": stamp}]}
        if disrupted:
            status["disruptedPods"] = disrupted
        self.write_status(rt, pdb, status)
        return recheck


def _disrupted_pods(pdb: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[dict[str, str], float | None]:
    """The evicted Pods still to be deleted (kept DELETION_TIMEOUT after their eviction; a Pod already terminating
    or gone drops out), and when to look again for the oldest one to expire."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    if not recorded:
        return {}, None
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    current = time.time()
    kept: dict[str, str] = {}
    recheck: float | None = None
    for name, stamp in recorded.items():
        try:
            left = DELETION_TIMEOUT - (current - parse_time(stamp).timestamp())
        except (TypeError, ValueError, AttributeError):
            continue
        if name in alive and left > 0:
            kept[name] = stamp
            recheck = left if recheck is None else min(recheck, left)
    return kept, recheck
