"""The scheduler: binds each Pod without ``spec.nodeName`` to a node, as kube-scheduler's default profile would.

A Pod waits ``schedule_delay`` seconds, then :func:`kubesim.controllers.placement.place` picks a node (filters:
cordon, taints and readiness, nodeSelector/affinity, topology spread; score: spread, then same-owner Pods per
zone and node). Bound: ``spec.nodeName`` set, PodScheduled True and a ``Normal Scheduled`` Event. Not placed: the
Pod stays Pending with PodScheduled False, reason ``Unschedulable`` and kube-scheduler's message, and a
``Warning FailedScheduling`` Event with the same message (repeats aggregate); it is tried again when a Node
changes or a Pod of its namespace is bound or goes away, as the scheduler's queue moves unschedulable Pods back
on cluster events. Spread and scoring count the Pods of the Pod's own namespace only.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.cluster.options import WriteOptions
from kubesim.controllers.base import Controller
from kubesim.controllers.placement import place
from kubesim.controllers.workloads import set_pod_condition as set_condition
from kubesim.meta import clone
from kubesim.store import Event

POD_KEY = ("", "pods")
NODE_KEY = ("", "nodes")
COMPONENT = "default-scheduler"


def _unbound(pod: dict[str, Any]) -> bool:
    return not (pod.get("spec") or {}).get("nodeName") and not pod["metadata"].get("deletionTimestamp") \
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class Scheduler(Controller):
    """One step per unbound Pod; ``self.pending`` holds the keys still waiting for a node."""

    name = "scheduler"

    def __init__(self, sim: Any) -> None:
        super().__init__(sim)
        self.opts = sim.options.kubelet
        self.pending: dict[tuple[str, str], float] = {}  # key -> when first seen (monotonic)

    def initial_keys(self) -> Iterable[Hashable]:
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.items(POD_KEY)
                if _unbound(p)]

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == NODE_KEY:
            return list(self.pending)
        if ev.key != POD_KEY:
            return ()
        key = (ev.namespace, ev.obj["metadata"]["name"])
        if ev.type != "DELETED" and _unbound(ev.obj):
            self.pending.setdefault(key, time.monotonic())
            return [key]
        self.pending.pop(key, None)
        # a Pod bound, terminating or gone changes the spread its namespace's pending Pods see
        return [k for k in self.pending if k[0] == ev.namespace]

    def sync(self, key: tuple[str, str]) -> float | None:
        ns, name = key
        rt = self.cluster.resource("", "pods")
        pod = self.cluster.find(rt, ns, name)
        if pod is None or not _unbound(pod):
            self.pending.pop(key, None)
            return None
        since = self.pending.setdefault(key, time.monotonic())
        left = self.opts.schedule_delay - (time.monotonic() - since)
        if left > 0:
            return left
        nodes = sorted(self.store.items(NODE_KEY), key=lambda n: n["metadata"]["name"])
        pods = list(self.store.items(POD_KEY, ns))
        placement = place(pod, nodes, pods)
        if placement.node is None:
            self._unschedulable(rt, pod, placement.message)
            return None
        self._bind(rt, pod, placement.node)
        self.pending.pop(key, None)
        return None

    def _bind(self, rt: Any, pod: dict[str, Any], node: str) -> None:
        new = clone(pod)
        new["spec"]["nodeName"] = node
        st = new.setdefault("status", {})
        st["conditions"] = set_condition(st.get("conditions"), "PodScheduled", "True")
        self.cluster.internal_put(rt, new)
        self.record_event(new, "Normal", "Scheduled",
                          f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}",
                          COMPONENT)

    def _unschedulable(self, rt: Any, pod: dict[str, Any], message: str) -> None:
        st = pod.get("status") or {}
        cond = next((c for c in st.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if not (cond and cond.get("status") == "False" and cond.get("message") == message):
            new = clone(pod)
            nst = new.setdefault("status", {})
            nst.setdefault("phase", "Pending")
            nst["conditions"] = set_condition(nst.get("conditions"), "PodScheduled", "False", "Unschedulable",
                                              message)
            self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager=COMPONENT))
        self.record_event(pod, "Warning", "FailedScheduling", message, COMPONENT)
