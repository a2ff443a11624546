"""The simulated cluster's Nodes: their names and zones, and the body and status a registering kubelet gives one.

A new cluster registers ``Options.nodes`` Nodes (3 by default) spread over ``Options.zones`` in turn (node i in
``zones[i % len(zones)]``): ``kubesim-node-1``, ``kubesim-node-2``, ... or, with one node, the single
``kubelet.node_name`` (``kubesim-node``). Each carries the well-known labels the scheduler and topology spread
read (``kubernetes.io/hostname``, ``topology.kubernetes.io/zone``, ``topology.kubernetes.io/region``), a Ready
condition, capacity and allocatable. A Node created later through the API gets the same status from the node
controller when it has no Ready condition yet, as a kubelet registering itself would post.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kubesim.meta import clone, new_uid, now

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.options import Options

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
REGION = "kubesim"
CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "250", "ephemeral-storage": "100Gi"}


def node_names(options: Options) -> list[tuple[str, str]]:
    """(name, zone) of every Node a new cluster registers."""
    count = max(1, int(options.nodes))
    zones = list(options.zones) or ["zone-a"]
    base = options.kubelet.node_name
    if count == 1:
        return [(base, zones[0])]
    return [(f"{base}-{i + 1}", zones[i % len(zones)]) for i in range(count)]


def node_body(name: str, zone: str | None) -> dict[str, Any]:
    """A Node's metadata and spec as it registers (no status yet)."""
    labels = {HOSTNAME_LABEL: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if zone:
        labels[ZONE_LABEL] = zone
        labels[REGION_LABEL] = REGION
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}}


def node_ip(name: str) -> str:
    """A stable InternalIP for a node name (10.0.<a>.<b>)."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.0.{digest[0] % 250 + 1}.{digest[1] % 250 + 2}"


def ready_status(node: dict[str, Any]) -> dict[str, Any]:
    """The status a kubelet posts for its Node: Ready, addresses, capacity and allocatable, node info."""
    name = node["metadata"]["name"]
    stamp = now()
    status = dict(node.get("status") or {})
    status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                             "message": "kubelet is posting ready status", "lastHeartbeatTime": stamp,
                             "lastTransitionTime": stamp}]
    status.setdefault("addresses", [{"type": "InternalIP", "address": node_ip(name)},
                                    {"type": "Hostname", "address": name}])
    status.setdefault("capacity", dict(CAPACITY))
    status.setdefault("allocatable", dict(CAPACITY))
    status.setdefault("nodeInfo", {"kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0",
                                   "operatingSystem": "linux", "architecture": "amd64",
                                   "containerRuntimeVersion": "containerd://1.7.0", "kernelVersion": "6.1.0-kubesim",
                                   "osImage": "kubesim", "bootID": new_uid(),
                                   "machineID": new_uid().replace("-", ""), "systemUUID": new_uid()})
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 10250}})
    return status


def has_ready_condition(node: dict[str, Any]) -> bool:
    """Whether the Node has posted a Ready condition at all (True, False or Unknown)."""
    return any(c.get("type") == "Ready" for c in (node.get("status") or {}).get("conditions") or [])


def is_node_ready(node: dict[str, Any]) -> bool:
    """Ready condition True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def host_ip(node: dict[str, Any] | None) -> str:
    """The Node's InternalIP (what a Pod's status.hostIP shows)."""
    for a in ((node or {}).get("status") or {}).get("addresses") or []:
        if a.get("type") == "InternalIP":
            return str(a.get("address"))
    return node_ip((node or {}).get("metadata", {}).get("name", ""))


def register(cluster: Cluster, name: str, zone: str | None) -> dict[str, Any]:
    """Create one Node and post its Ready status."""
    rt = cluster.resource("", "nodes")
    node = cluster.create(rt, "", node_body(name, zone))
    ready = clone(node)
    ready["status"] = ready_status(node)
    return cluster.update(rt, "", name, ready, subresource="status")


def ensure_nodes(cluster: Cluster, options: Options) -> None:
    """On a new cluster (no Node stored), register the configured Nodes; a cluster loaded from disk keeps its
    own (Nodes deleted or added through the API stay so across restarts)."""
    rt = cluster.resource("", "nodes")
    if next(iter(cluster.store.items(rt.key)), None) is not None:
        return
    for name, zone in node_names(options):
        register(cluster, name, zone)
