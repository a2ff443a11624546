"""StatefulSet rolling updates with a partition, ControllerRevisions, and the kubelet's readiness switch."""

from __future__ import annotations

import time

from kubernetes import client

from tests.kubesim.test_kubesim_workloads import wait_for

REV = "controller-revision-hash"


def sts(name: str, image: str, partition: int, replicas: int = 3, policy: str = "OrderedReady") -> dict:
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "serviceName": name, "podManagementPolicy": policy,
        "selector": {"matchLabels": {"app": name}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "c", "image": image}]}}}}


def pods_by_ordinal(core: client.CoreV1Api, ns: str, name: str) -> dict[int, client.V1Pod]:
    return {int(p.metadata.name.rsplit("-", 1)[1]): p
            for p in core.list_namespaced_pod(ns, label_selector=f"app={name}").items}


def ready(p: client.V1Pod) -> bool:
    return not p.metadata.deletion_timestamp and any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])


def pending_revision(status: client.V1StatefulSetStatus) -> str | None:
    """The update revision while it differs from the current one."""
    return status.update_revision if status.update_revision != status.current_revision else None


def all_ready(core: client.CoreV1Api, ns: str, name: str, n: int) -> bool:
    pods = pods_by_ordinal(core, ns, name)
    return len(pods) == n and all(ready(p) for p in pods.values())


def test_partition_updates_only_high_ordinals_from_the_top_one_ready_pod_at_a_time(apps, core, ns):
    apps.create_namespaced_stateful_set(ns, sts("kv", "kv:1", partition=0))
    wait_for(lambda: all_ready(core, ns, "kv", 3))
    first = apps.read_namespaced_stateful_set("kv", ns).status
    assert first.current_revision == first.update_revision and first.current_replicas == 3
    apps.patch_namespaced_stateful_set("kv", ns, {"spec": {
        "updateStrategy": {"rollingUpdate": {"partition": 3}},
        "template": {"spec": {"containers": [{"name": "c", "image": "kv:2"}]}}}})
    wait_for(lambda: apps.read_namespaced_stateful_set("kv", ns).status.update_revision != first.update_revision)
    time.sleep(0.2)
    st = apps.read_namespaced_stateful_set("kv", ns).status
    new_rev = st.update_revision
    assert st.current_revision == first.current_revision and st.current_replicas == 3 and not st.updated_replicas
    assert {p.metadata.labels[REV] for p in pods_by_ordinal(core, ns, "kv").values()} == {first.update_revision}
    revisions = {r.metadata.name: r for r in apps.list_namespaced_controller_revision(ns).items}
    assert set(revisions) == {first.update_revision, new_rev}
    assert revisions[new_rev].revision == 2 and revisions[new_rev].metadata.owner_references[0].name == "kv"

    apps.patch_namespaced_stateful_set("kv", ns, {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}})
    wait_for(lambda: (p := pods_by_ordinal(core, ns, "kv").get(2)) and p.metadata.labels[REV] == new_rev
             and ready(p))
    wait_for(lambda: apps.read_namespaced_stateful_set("kv", ns).status.updated_replicas == 1)
    st = apps.read_namespaced_stateful_set("kv", ns).status
    assert (st.current_replicas, st.updated_replicas, st.current_revision) == (2, 1, first.current_revision)
    pods = pods_by_ordinal(core, ns, "kv")
    assert pods[2].spec.containers[0].image == "kv:2" and pods[1].spec.containers[0].image == "kv:1"

    # an ordinal below the partition that goes comes back on the current revision
    core.delete_namespaced_pod("kv-0", ns, grace_period_seconds=0)
    wait_for(lambda: all_ready(core, ns, "kv", 3))
    back = pods_by_ordinal(core, ns, "kv")[0]
    assert back.metadata.labels[REV] == first.current_revision and back.spec.containers[0].image == "kv:1"

    # an updated Pod made unready holds the roll; Ready again, it goes on 1 then 0
    core.patch_namespaced_pod("kv-2", ns, {"metadata": {"annotations": {"kubesim.io/ready": "false"}}})
    wait_for(lambda: not ready(pods_by_ordinal(core, ns, "kv")[2]))
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=kv-2").items
    assert any(e.reason == "Unhealthy" and e.type == "Warning" for e in events)
    apps.patch_namespaced_stateful_set("kv", ns, {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})
    time.sleep(0.3)
    assert {o: p.metadata.labels[REV] for o, p in pods_by_ordinal(core, ns, "kv").items()}[1] == first.current_revision
    core.patch_namespaced_pod("kv-2", ns, {"metadata": {"annotations": {"kubesim.io/ready": None}}})
    updated_at: dict[int, float] = {}
    deadline = time.monotonic() + 10
    while len(updated_at) < 3 and time.monotonic() < deadline:
        for o, p in pods_by_ordinal(core, ns, "kv").items():
            if p.metadata.labels[REV] == new_rev:
                updated_at.setdefault(o, time.monotonic())
        time.sleep(0.02)
    assert sorted(updated_at, key=updated_at.get) == [2, 1, 0]
    wait_for(lambda: (s := apps.read_namespaced_stateful_set("kv", ns).status).current_revision == new_rev
             and s.current_replicas == 3 and s.updated_replicas == 3 and s.ready_replicas == 3)


def test_parallel_rolling_update_still_waits_for_each_updated_pod_to_be_ready(apps, core, ns):
    apps.create_namespaced_stateful_set(ns, sts("pp", "pp:1", partition=0, policy="Parallel"))
    wait_for(lambda: all_ready(core, ns, "pp", 3))
    # the new revision's Pods come up not Ready (the readiness switch in the template)
    apps.patch_namespaced_stateful_set("pp", ns, {"spec": {"template": {
        "metadata": {"annotations": {"kubesim.io/ready": "false"}},
        "spec": {"containers": [{"name": "c", "image": "pp:2"}]}}}})
    new_rev = wait_for(lambda: pending_revision(apps.read_namespaced_stateful_set("pp", ns).status))
    wait_for(lambda: (p := pods_by_ordinal(core, ns, "pp").get(2)) and p.metadata.labels[REV] == new_rev
             and p.status.phase == "Running")
    time.sleep(0.3)
    assert [p.metadata.labels[REV] == new_rev for _, p in sorted(pods_by_ordinal(core, ns, "pp").items())] == [
        False, False, True]
    core.patch_namespaced_pod("pp-2", ns, {"metadata": {"annotations": {"kubesim.io/ready": "true"}}})
    wait_for(lambda: (p := pods_by_ordinal(core, ns, "pp").get(1)) and p.metadata.labels[REV] == new_rev)
    time.sleep(0.3)
    assert pods_by_ordinal(core, ns, "pp")[0].metadata.labels[REV] != new_rev
