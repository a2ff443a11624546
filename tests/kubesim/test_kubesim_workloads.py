"""The simulated cluster: Deployments and StatefulSets get Pods that run and become Ready; faults."""

from __future__ import annotations

from kubernetes import client

from kubesim.testing import wait_for


def deployment(name, image="nginx:1.27", replicas=2, **spec):
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": image}]}},
        **spec}}


def _conds(obj):
    return {c.type: (c.status, c.reason) for c in obj.status.conditions or []}


def test_a_deployment_becomes_available_with_ready_owned_pods(apps, core, ns):
    apps.create_namespaced_deployment(ns, deployment("web", replicas=3))
    d = wait_for(lambda: (lambda d: d if d.status.available_replicas == 3 else None)(
        apps.read_namespaced_deployment_status("web", ns)))
    assert (d.status.replicas, d.status.ready_replicas, d.status.updated_replicas) == (3, 3, 3)
    assert d.status.observed_generation == 1
    assert _conds(d) == {"Available": ("True", "MinimumReplicasAvailable"),
                         "Progressing": ("True", "NewReplicaSetAvailable")}
    rs = apps.list_namespaced_replica_set(ns).items
    assert len(rs) == 1 and rs[0].metadata.owner_references[0].name == "web"
    pods = core.list_namespaced_pod(ns, label_selector="app=web").items
    assert len(pods) == 3
    for p in pods:
        assert p.status.phase == "Running" and p.spec.node_name.startswith("kubesim-node-") and p.status.pod_ip
        assert p.metadata.owner_references[0].kind == "ReplicaSet" and p.metadata.owner_references[0].controller
        assert {c.type: c.status for c in p.status.conditions}["Ready"] == "True"


def test_pods_go_pending_then_running_then_ready(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "busybox:1.36"}]}})
    first = core.read_namespaced_pod("p", ns)
    assert first.status.phase == "Pending"
    wait_for(lambda: core.read_namespaced_pod("p", ns).status.phase == "Running")
    wait_for(lambda: core.read_namespaced_pod("p", ns).status.container_statuses[0].ready)


def test_scaling_and_rolling_update_are_followed(apps, core, ns):
    apps.create_namespaced_deployment(ns, deployment("roll", replicas=2))
    wait_for(lambda: apps.read_namespaced_deployment_status("roll", ns).status.available_replicas == 2)
    apps.patch_namespaced_deployment_scale("roll", ns, {"spec": {"replicas": 4}})
    wait_for(lambda: apps.read_namespaced_deployment_status("roll", ns).status.available_replicas == 4)
    apps.patch_namespaced_deployment("roll", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "nginx:1.28"}]}}}})

    def rolled():
        d = apps.read_namespaced_deployment_status("roll", ns)
        pods = core.list_namespaced_pod(ns, label_selector="app=roll").items
        return (d.status.observed_generation == 3 and d.status.updated_replicas == 4
                and d.status.available_replicas == 4 and d.status.replicas == 4
                and len(pods) == 4 and all(p.spec.containers[0].image == "nginx:1.28" for p in pods))

    wait_for(rolled)
    sets = {rs.spec.template.spec.containers[0].image: rs.spec.replicas
            for rs in apps.list_namespaced_replica_set(ns).items}
    assert sets == {"nginx:1.27": 0, "nginx:1.28": 4}
    apps.patch_namespaced_deployment_scale("roll", ns, {"spec": {"replicas": 1}})
    wait_for(lambda: len(core.list_namespaced_pod(ns, label_selector="app=roll").items) == 1)


def test_a_broken_image_never_becomes_available(apps, core, ns):
    apps.create_namespaced_deployment(ns, deployment("bad", image="nginx:broken", replicas=1,
                                                     progressDeadlineSeconds=1))
    wait_for(lambda: _conds(apps.read_namespaced_deployment_status("bad", ns)).get("Progressing") ==
             ("False", "ProgressDeadlineExceeded"), timeout=5)
    d = apps.read_namespaced_deployment_status("bad", ns)
    assert _conds(d)["Available"] == ("False", "MinimumReplicasUnavailable")
    assert not d.status.available_replicas
    pod = core.list_namespaced_pod(ns, label_selector="app=bad").items[0]
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ImagePullBackOff"


def test_a_crashing_image_loops_with_growing_restart_count(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "crash"}, "spec": {"containers": [
        {"name": "c", "image": "app:crashloop"}]}})
    wait_for(lambda: (core.read_namespaced_pod("crash", ns).status.container_statuses or [None])[0] is not None
             and core.read_namespaced_pod("crash", ns).status.container_statuses[0].restart_count >= 2, timeout=5)
    st = core.read_namespaced_pod("crash", ns).status.container_statuses[0]
    assert st.state.waiting.reason == "CrashLoopBackOff" and not st.ready


def test_failing_a_pod_makes_the_replicaset_replace_it(kubesim, apps, core, ns):
    apps.create_namespaced_deployment(ns, deployment("heal", replicas=1))
    wait_for(lambda: apps.read_namespaced_deployment_status("heal", ns).status.available_replicas == 1)
    victim = core.list_namespaced_pod(ns, label_selector="app=heal").items[0].metadata.name
    failed = kubesim.fail_pod(ns, victim, reason="OOMKilled", exit_code=137)
    assert failed["status"]["phase"] == "Failed"
    assert core.read_namespaced_pod(victim, ns).status.container_statuses[0].state.terminated.exit_code == 137

    def replaced():
        pods = core.list_namespaced_pod(ns, label_selector="app=heal", field_selector="status.phase=Running").items
        return [p for p in pods if p.metadata.name != victim and
                {c.type: c.status for c in p.status.conditions}.get("Ready") == "True"]

    wait_for(replaced)
    wait_for(lambda: apps.read_namespaced_deployment_status("heal", ns).status.available_replicas == 1)


def test_a_statefulset_creates_ordinal_pods_in_order_and_rolls(apps, core, ns):
    apps.create_namespaced_stateful_set(ns, {"metadata": {"name": "db"}, "spec": {
        "replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [
            {"name": "db", "image": "postgres:16"}]}}}})
    s = wait_for(lambda: (lambda s: s if s.status.ready_replicas == 3 else None)(
        apps.read_namespaced_stateful_set_status("db", ns)))
    names = sorted(p.metadata.name for p in core.list_namespaced_pod(ns, label_selector="app=db").items)
    assert names == ["db-0", "db-1", "db-2"]
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
    assert pods["db-0"].metadata.creation_timestamp <= pods["db-2"].metadata.creation_timestamp
    first_rev = s.status.update_revision
    apps.patch_namespaced_stateful_set("db", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "db", "image": "postgres:17"}]}}}})

    def rolled():
        st = apps.read_namespaced_stateful_set_status("db", ns).status
        return (st.update_revision != first_rev and st.updated_replicas == 3 and st.ready_replicas == 3
                and st.current_revision == st.update_revision)

    wait_for(rolled)
    images = {p.spec.containers[0].image for p in core.list_namespaced_pod(ns, label_selector="app=db").items}
    assert images == {"postgres:17"}
    apps.patch_namespaced_stateful_set_scale("db", ns, {"spec": {"replicas": 1}})
    wait_for(lambda: sorted(p.metadata.name for p in core.list_namespaced_pod(ns, label_selector="app=db").items)
             == ["db-0"])


def test_deleting_a_deployment_collects_its_replicasets_and_pods(apps, core, ns):
    apps.create_namespaced_deployment(ns, deployment("gone", replicas=2))
    wait_for(lambda: len(core.list_namespaced_pod(ns).items) == 2)
    apps.delete_namespaced_deployment("gone", ns)
    wait_for(lambda: not core.list_namespaced_pod(ns).items and not apps.list_namespaced_replica_set(ns).items)


def test_every_namespace_gets_a_default_service_account(core, ns):
    wait_for(lambda: [s.metadata.name for s in core.list_namespaced_service_account(ns).items] == ["default"])


def test_controllers_post_events(core, apps, ns):
    apps.create_namespaced_deployment(ns, deployment("ev", replicas=1))
    wait_for(lambda: {"ScalingReplicaSet", "SuccessfulCreate", "Scheduled"} <=
             {e.reason for e in core.list_namespaced_event(ns).items})
    pod = core.list_namespaced_pod(ns).items[0]
    sel = f"involvedObject.name={pod.metadata.name},involvedObject.kind=Pod"
    assert {e.reason for e in core.list_namespaced_event(ns, field_selector=sel).items} >= {"Scheduled"}


def test_node_is_registered_and_ready(core):
    node = core.read_node("kubesim-node-1")
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert isinstance(client.V1Node, type)


def test_a_running_pod_is_deleted_gracefully_and_the_kubelet_removes_it(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "g"}, "spec": {"containers": [
        {"name": "c", "image": "x:1"}]}})
    wait_for(lambda: core.read_namespaced_pod("g", ns).status.phase == "Running")
    out = core.delete_namespaced_pod("g", ns)
    assert out.metadata.deletion_timestamp is not None and out.metadata.deletion_grace_period_seconds == 30
    assert core.read_namespaced_pod("g", ns).metadata.deletion_timestamp is not None  # Terminating
    wait_for(lambda: not core.list_namespaced_pod(ns, field_selector="metadata.name=g").items, timeout=5)


def test_grace_period_zero_and_unbound_pods_go_at_once(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "f"}, "spec": {"containers": [
        {"name": "c", "image": "x:1"}]}})
    wait_for(lambda: core.read_namespaced_pod("f", ns).spec.node_name)
    core.delete_namespaced_pod("f", ns, grace_period_seconds=0)
    assert not core.list_namespaced_pod(ns, field_selector="metadata.name=f").items


def test_without_a_kubelet_unbound_pods_go_at_once_and_bound_ones_stay_terminating():
    from kubesim.testing import running_kubesim

    with running_kubesim(controllers=False) as k:
        core = client.CoreV1Api(k.api_client())
        spec = {"containers": [{"name": "c", "image": "x:1"}]}
        core.create_namespaced_pod("default", {"metadata": {"name": "unbound"}, "spec": spec})
        core.create_namespaced_pod("default", {"metadata": {"name": "bound"}, "spec": {**spec,
                                                                                     "nodeName": "kubesim-node"}})
        core.delete_namespaced_pod("unbound", "default")
        core.delete_namespaced_pod("bound", "default", grace_period_seconds=5)
        names = {p.metadata.name: p for p in core.list_namespaced_pod("default").items}
        assert set(names) == {"bound"}
        assert names["bound"].metadata.deletion_grace_period_seconds == 5
        core.delete_namespaced_pod("bound", "default", grace_period_seconds=0)  # what --force does
        assert not core.list_namespaced_pod("default").items


def test_pod_log_reports_the_simulated_container_lifecycle(kubesim, core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "lg"}, "spec": {"containers": [
        {"name": "c", "image": "x:1"}]}})
    wait_for(lambda: core.read_namespaced_pod("lg", ns).status.phase == "Running")
    assert "started from image x:1" in core.read_namespaced_pod_log("lg", ns)
    kubesim.fail_pod(ns, "lg", reason="Error", exit_code=3)
    assert "terminated: Error (exit code 3)" in core.read_namespaced_pod_log("lg", ns, container="c")
