"""ReplicaSet controller: keeps ``spec.replicas`` active Pods and reports their readiness in status."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.controllers.workloads import is_pod_active, is_pod_ready, pod_from_template
from kubesim.meta import random_suffix
from kubesim.store import Event

RS_KEY = ("apps", "replicasets")
POD_KEY = ("", "pods")


def _deletion_rank(pod: dict[str, Any]) -> tuple[int, int, str]:
    status = pod.get("status") or {}
    scheduled = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    running = 1 if status.get("phase") == "Running" else 0
    ready = 1 if is_pod_ready(pod) else 0
    # unscheduled < pending < not ready < ready; among equals the newest goes first
    return (scheduled + running + ready, 0, "")


class ReplicaSetController(Controller):
    """One step per ReplicaSet: create or delete Pods, then write status."""

    name = "replicaset"

    def initial_keys(self) -> Iterable[Hashable]:
        return self.object_keys(RS_KEY)

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == RS_KEY:
            return [(ev.namespace, ev.obj["metadata"]["name"])]
        if ev.key == POD_KEY:
            for ref in ev.obj["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "ReplicaSet":
                    return [(ev.namespace, ref["name"])]
        return ()

    def pods_of(self, rs: dict[str, Any]) -> list[dict[str, Any]]:
        return self.store.controlled_by(POD_KEY, rs["metadata"]["namespace"], rs["metadata"]["uid"])

    def sync(self, key: tuple[str, str]) -> float | None:
        ns, name = key
        rt = self.cluster.resource("apps", "replicasets")
        rs = self.cluster.find(rt, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return None
        pod_rt = self.cluster.resource("", "pods")
        active = [p for p in self.pods_of(rs) if is_pod_active(p)]
        want = int((rs.get("spec") or {}).get("replicas", 1))
        template = (rs.get("spec") or {}).get("template") or {}
        if len(active) < want:
            for _ in range(want - len(active)):
                pod = pod_from_template(template, f"{name}-{random_suffix()}", ns, self.owner_ref(rs))
                created = self.cluster.create(pod_rt, ns, pod)
                self.record_event(rs, "Normal", "SuccessfulCreate",
                                  f"Created pod: {created['metadata']['name']}", "replicaset-controller")
        elif len(active) > want:
            doomed = sorted(active, key=lambda p: (_deletion_rank(p)[0],
                                                   "".join(chr(255 - ord(c)) for c in
                                                           p["metadata"].get("creationTimestamp", ""))))
            for pod in doomed[: len(active) - want]:
                self.cluster.delete(pod_rt, ns, pod["metadata"]["name"])
                self.record_event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}",
                                  "replicaset-controller")
        rs = self.cluster.find(rt, ns, name)
        if rs is None:
            return None
        active = [p for p in self.pods_of(rs) if is_pod_active(p)]
        ready = sum(1 for p in active if is_pod_ready(p))
        labels = template.get("metadata", {}).get("labels") or {}
        fully = sum(1 for p in active if all((p["metadata"].get("labels") or {}).get(k) == v
                                             for k, v in labels.items()))
        status: dict[str, Any] = {"replicas": len(active), "fullyLabeledReplicas": fully,
                                  "observedGeneration": rs["metadata"].get("generation", 1)}
        if ready:
            status["readyReplicas"] = ready
            status["availableReplicas"] = ready
        self.write_status(rt, rs, status)
        return None
