"""Nodes in zones and the scheduler: topology spread, cordons, node selectors and kube-scheduler's wording."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from kubesim.controllers.placement import fit_error, place
from kubesim.nodes import node_body
from kubesim.testing import running_kubesim
from tests.kubesim.test_kubesim_workloads import wait_for

ZONE = "topology.kubernetes.io/zone"
SPREAD = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "db"}}}]
# kube-scheduler's FitError plus the DefaultPreemption PostFilter's message, as `kubectl describe pod` shows them
CORDONED_ZONE = ("0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match pod topology "
                 "spread constraints. preemption: 0/3 nodes are available: 1 Preemption is not helpful for "
                 "scheduling, 2 No preemption victims found for incoming pod.")


def pod(name: str, labels: dict | None = None, **spec: object) -> dict:
    return {"metadata": {"name": name, "labels": labels or {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "db:1"}], **spec}}


def node(name: str, zone: str, **spec: object) -> dict:
    body = node_body(name, zone)
    body["spec"].update(spec)
    body["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return body


def zones_of(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    zone = {n.metadata.name: n.metadata.labels[ZONE] for n in core.list_node().items}
    return {p.metadata.name: zone.get(p.spec.node_name) for p in core.list_namespaced_pod(ns).items}


def scheduled(core: client.CoreV1Api, ns: str, name: str) -> client.V1PodCondition | None:
    p = core.read_namespaced_pod(name, ns)
    return next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)


def test_a_new_cluster_has_three_ready_nodes_in_three_zones(core):
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert {name: n.metadata.labels[ZONE] for name, n in nodes.items()}.items() >= {
        "kubesim-node-1": "zone-a", "kubesim-node-2": "zone-b", "kubesim-node-3": "zone-c"}.items()
    n = nodes["kubesim-node-2"]
    assert n.metadata.labels["kubernetes.io/hostname"] == "kubesim-node-2"
    assert {c.type: c.status for c in n.status.conditions}["Ready"] == "True"
    assert n.status.allocatable["pods"] == "250" and n.status.addresses[0].type == "InternalIP"


def test_three_pods_with_max_skew_1_land_one_per_zone(core, ns):
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"db-{i}", topologySpreadConstraints=SPREAD))
    wait_for(lambda: all(zones_of(core, ns).values()))
    assert sorted(zones_of(core, ns).values()) == ["zone-a", "zone-b", "zone-c"]
    p = core.read_namespaced_pod("db-0", ns)
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=db-0").items
    assert any(e.reason == "Scheduled" and e.message == f"Successfully assigned {ns}/db-0 to {p.spec.node_name}"
               and e.source.component == "default-scheduler" for e in events)
    wait_for(lambda: core.read_namespaced_pod("db-0", ns).status.host_ip)


def test_a_cordoned_zone_leaves_the_pod_pending_with_the_schedulers_reason_instead_of_packing(kubesim, core, ns):
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"db-{i}", topologySpreadConstraints=SPREAD))
    wait_for(lambda: all(zones_of(core, ns).values()))
    lost = next(name for name, zone in zones_of(core, ns).items() if zone == "zone-c")
    node_c = core.read_namespaced_pod(lost, ns).spec.node_name
    core.patch_node(node_c, {"spec": {"unschedulable": True}})
    try:
        core.delete_namespaced_pod(lost, ns, grace_period_seconds=0)
        core.create_namespaced_pod(ns, pod("db-3", topologySpreadConstraints=SPREAD))
        wait_for(lambda: scheduled(core, ns, "db-3") is not None)
        cond = scheduled(core, ns, "db-3")
        assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", CORDONED_ZONE)
        p = core.read_namespaced_pod("db-3", ns)
        assert p.status.phase == "Pending" and p.spec.node_name is None
        events = core.list_namespaced_event(ns, field_selector="involvedObject.name=db-3").items
        failed = [e for e in events if e.reason == "FailedScheduling"]
        assert failed and failed[0].type == "Warning" and failed[0].message == CORDONED_ZONE
        assert failed[0].source.component == "default-scheduler"
        time.sleep(0.2)
        assert core.read_namespaced_pod("db-3", ns).spec.node_name is None  # never packed into zone a or b
    finally:
        core.patch_node(node_c, {"spec": {"unschedulable": False}})
    wait_for(lambda: core.read_namespaced_pod("db-3", ns).spec.node_name == node_c)  # uncordoned: it goes there


def test_node_selector_mismatch_uses_the_affinity_reason(core, ns):
    core.create_namespaced_pod(ns, pod("sel", nodeSelector={ZONE: "zone-z"}))
    wait_for(lambda: scheduled(core, ns, "sel") is not None)
    assert scheduled(core, ns, "sel").message == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
        "available: 3 Preemption is not helpful for scheduling.")
    core.create_namespaced_pod(ns, pod("b", nodeSelector={ZONE: "zone-b"}))
    wait_for(lambda: core.read_namespaced_pod("b", ns).spec.node_name == "kubesim-node-2")


@pytest.fixture(scope="module")
def cluster5():
    """A cluster of its own (nodes are deleted here): two nodes in two zones."""
    with running_kubesim(schedule_delay=0.01, start_delay=0.05, ready_delay=0.05, nodes=2,
                         zones=["east", "west"], gc_interval=0.2) as k:
        yield client.CoreV1Api(k.api_client())


def test_a_deleted_zone_blocks_the_spread_with_min_domains_and_its_pods_are_collected(cluster5):
    core = cluster5
    core.create_namespace({"metadata": {"name": "z"}})
    core.create_node(node("extra", "north"))
    wait_for(lambda: {c.type: c.status for c in core.read_node("extra").status.conditions}["Ready"] == "True")
    spread = [{**SPREAD[0], "minDomains": 3}]
    for i in range(3):
        core.create_namespaced_pod("z", pod(f"db-{i}", topologySpreadConstraints=spread))
    wait_for(lambda: all(zones_of(core, "z").values()))
    assert sorted(zones_of(core, "z").values()) == ["east", "north", "west"]
    lost = next(name for name, zone in zones_of(core, "z").items() if zone == "north")
    core.delete_node("extra")
    wait_for(lambda: lost not in zones_of(core, "z"))  # pod GC removed the orphaned Pod
    core.create_namespaced_pod("z", pod("db-3", topologySpreadConstraints=spread))
    wait_for(lambda: scheduled(core, "z", "db-3") is not None)
    assert scheduled(core, "z", "db-3").message == (
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints. preemption: 0/2 nodes "
        "are available: 2 No preemption victims found for incoming pod.")
    core.create_node(node("extra2", "north"))  # the zone comes back: the Pod goes there
    wait_for(lambda: core.read_namespaced_pod("db-3", "z").spec.node_name == "extra2")


def test_a_not_ready_node_is_tainted_for_the_scheduler(cluster5):
    core = cluster5
    core.create_namespace({"metadata": {"name": "nr"}})
    for name in ("kubesim-node-1", "kubesim-node-2"):
        n = core.read_node_status(name)
        n.status.conditions = [client.V1NodeCondition(type="Ready", status="False", reason="KubeletNotReady")]
        core.replace_node_status(name, n)
    try:
        core.create_namespaced_pod("nr", pod("p", nodeSelector={ZONE: "east"}))
        wait_for(lambda: scheduled(core, "nr", "p") is not None)
        msg = scheduled(core, "nr", "p").message
        assert msg.startswith("0/") and "node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in msg
    finally:
        for name in ("kubesim-node-1", "kubesim-node-2"):
            n = core.read_node_status(name)
            n.status.conditions = [client.V1NodeCondition(type="Ready", status="True", reason="KubeletReady")]
            core.replace_node_status(name, n)
    wait_for(lambda: core.read_namespaced_pod("p", "nr").spec.node_name == "kubesim-node-1")


def test_one_node_keeps_the_single_kubesim_node():
    with running_kubesim(nodes=1, schedule_delay=0.01, start_delay=0.01, ready_delay=0.01) as k:
        core = client.CoreV1Api(k.api_client())
        assert [n.metadata.name for n in core.list_node().items] == ["kubesim-node"]
        core.create_namespaced_pod("default", pod("one"))
        wait_for(lambda: core.read_namespaced_pod("one", "default").status.phase == "Running")
        assert core.read_namespaced_pod("one", "default").spec.node_name == "kubesim-node"


def _n(name: str, zone: str) -> dict:
    return node(name, zone)


def _bound(name: str, node_name: str, labels: dict | None = None) -> dict:
    body = pod(name, labels)
    body["metadata"]["namespace"] = "x"
    body["spec"]["nodeName"] = node_name
    return body


def test_placement_schedule_anyway_prefers_the_emptiest_zone_and_min_domains_counts_missing_zones():
    nodes = [_n("a", "za"), _n("b", "zb")]
    existing = [_bound("e1", "a"), _bound("e2", "a")]
    soft = {**SPREAD[0], "whenUnsatisfiable": "ScheduleAnyway"}
    new = pod("n", topologySpreadConstraints=[soft])
    new["metadata"]["namespace"] = "x"
    assert place(new, nodes, existing).node == "b"
    hard = pod("h", topologySpreadConstraints=[{**SPREAD[0], "minDomains": 3}])
    hard["metadata"]["namespace"] = "x"
    existing = [_bound("e1", "a"), _bound("e2", "b")]
    assert place(hard, nodes, existing).node is None  # 2 domains < minDomains 3: the minimum counts as 0
    assert place(hard, [], existing).message == "no nodes available to schedule pods"
    never = {"metadata": {"name": "p"}, "spec": {"preemptionPolicy": "Never"}}
    assert fit_error(never, {"a": "node(s) were unschedulable"}) == (
        "0/1 nodes are available: 1 node(s) were unschedulable. preemption: not eligible due to "
        "preemptionPolicy=Never.")


def test_nodes_and_zones_come_from_flags_or_the_environment(monkeypatch):
    from kubesim.cli import build_parser, options_from_args
    from kubesim.nodes import node_names

    opts = options_from_args(build_parser().parse_args(["--no-auth", "--nodes", "4", "--zones", "x, y"]))
    assert node_names(opts) == [("kubesim-node-1", "x"), ("kubesim-node-2", "y"), ("kubesim-node-3", "x"),
                                ("kubesim-node-4", "y")]
    monkeypatch.setenv("KUBESIM_NODES", "2")
    monkeypatch.setenv("KUBESIM_ZONES", "east,west")
    opts = options_from_args(build_parser().parse_args(["--no-auth"]))
    assert (opts.nodes, opts.zones) == (2, ["east", "west"])
    with pytest.raises(ValueError, match="--nodes must be at least 1"):
        options_from_args(build_parser().parse_args(["--no-auth", "--nodes", "0"]))


def test_a_restarted_cluster_keeps_its_nodes_as_they_were(tmp_path):
    with running_kubesim(data_dir=str(tmp_path), controllers=False) as k:
        core = client.CoreV1Api(k.api_client())
        core.delete_node("kubesim-node-3")
        k.restart()
        core = client.CoreV1Api(k.api_client())
        assert sorted(n.metadata.name for n in core.list_node().items) == ["kubesim-node-1", "kubesim-node-2"]
