"""Node lifecycle: a Node created through the API registers (its kubelet posts a Ready status), and Pods bound to
a Node that no longer exists are deleted at once, as kube-controller-manager's pod GC removes orphaned Pods.

A Node's status is left alone once it has a Ready condition, so a test can make a node NotReady by writing its
status (``Ready`` False or Unknown), cordon it (``spec.unschedulable``), or remove it (delete the Node: its Pods
go, and their controllers recreate them elsewhere or leave them Pending).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.meta import clone
from kubesim.nodes import has_ready_condition, ready_status
from kubesim.store import Event

NODE_KEY = ("", "nodes")
POD_KEY = ("", "pods")


class NodeController(Controller):
    """Keys: ``("node", name)`` to register a Node, ``("pod", namespace, name)`` to collect an orphaned Pod."""

    name = "nodes"

    def initial_keys(self) -> Iterable[Hashable]:
        keys: list[Hashable] = [("node", n["metadata"]["name"]) for n in self.store.items(NODE_KEY)]
        keys += [("pod", p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.items(POD_KEY)
                 if (p.get("spec") or {}).get("nodeName")]
        return keys

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == NODE_KEY:
            name = ev.obj["metadata"]["name"]
            if ev.type != "DELETED":
                return [("node", name)]
            return [("pod", p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.items(POD_KEY)
                    if (p.get("spec") or {}).get("nodeName") == name]
        if ev.key == POD_KEY and ev.type != "DELETED" and (ev.obj.get("spec") or {}).get("nodeName"):
            if self.store.get(NODE_KEY, "", ev.obj["spec"]["nodeName"]) is None:
                return [("pod", ev.namespace, ev.obj["metadata"]["name"])]
        return ()

    def sync(self, key: tuple[Any, ...]) -> float | None:
        if key[0] == "node":
            self._register(key[1])
        else:
            self._collect(key[1], key[2])
        return None

    def _register(self, name: str) -> None:
        rt = self.cluster.resource("", "nodes")
        node = self.cluster.find(rt, "", name)
        if node is None or node["metadata"].get("deletionTimestamp") or has_ready_condition(node):
            return
        new = clone(node)
        new["status"] = ready_status(node)
        self.cluster.replace(rt, node, new, subresource="status")

    def _collect(self, namespace: str, name: str) -> None:
        rt = self.cluster.resource("", "pods")
        pod = self.cluster.find(rt, namespace, name)
        node = (pod or {}).get("spec", {}).get("nodeName")
        if pod is None or not node or self.store.get(NODE_KEY, "", node) is not None:
            return
        self.cluster.delete(rt, namespace, name, {"gracePeriodSeconds": 0})
