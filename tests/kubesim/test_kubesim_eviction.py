"""The Eviction API against PodDisruptionBudgets: kube-apiserver's answers, codes and wording."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch

from tests.kubesim.test_kubesim_workloads import wait_for

LABELS = {"app": "kv"}


def eviction(name: str, ns: str, **delete_options: object) -> client.V1Eviction:
    return client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns),
                             delete_options=client.V1DeleteOptions(**delete_options) if delete_options else None)


def refused(call) -> tuple[int, dict]:
    with pytest.raises(client.ApiException) as e:
        call()
    return e.value.status, json.loads(e.value.body)


def ready_pods(core: client.CoreV1Api, ns: str, n: int, labels: dict | None = None, prefix: str = "kv") -> None:
    for i in range(n):
        core.create_namespaced_pod(ns, {"metadata": {"name": f"{prefix}-{i}", "labels": labels or LABELS},
                                        "spec": {"containers": [{"name": "c", "image": "kv:1"}]}})
    wait_for(lambda: sum(1 for p in core.list_namespaced_pod(ns).items if p.metadata.name.startswith(prefix)
                         and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []))
             == n)


def budget(policy: client.PolicyV1Api, ns: str, name: str = "kv", **spec: object) -> None:
    policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": LABELS}, **spec}})


def allowed(policy: client.PolicyV1Api, ns: str, name: str = "kv") -> int | None:
    st = policy.read_namespaced_pod_disruption_budget(name, ns).status
    return st.disruptions_allowed if st and st.observed_generation else None


@pytest.fixture(scope="package")
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


def test_eviction_takes_one_disruption_then_answers_429_as_kube_apiserver(core, policy, ns):
    ready_pods(core, ns, 3)
    budget(policy, ns, minAvailable=2)
    wait_for(lambda: allowed(policy, ns) == 1)
    rv = policy.list_namespaced_pod_disruption_budget(ns).metadata.resource_version
    resp = core.api_client.call_api(f"/api/v1/namespaces/{ns}/pods/kv-0/eviction", "POST",
                                    body={"apiVersion": "policy/v1", "kind": "Eviction",
                                          "metadata": {"name": "kv-0", "namespace": ns}},
                                    header_params={"Content-Type": "application/json", "Accept": "application/json"},
                                    auth_settings=["BearerToken"], _preload_content=False)
    assert resp.status == 201
    assert json.loads(resp.data) == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                        "code": 201}
    assert core.read_namespaced_pod("kv-0", ns).metadata.deletion_timestamp is not None  # deleted gracefully
    seen = [e["object"].status for e in watch.Watch().stream(
        policy.list_namespaced_pod_disruption_budget, ns, resource_version=rv, timeout_seconds=1)]
    recorded = next(s for s in seen if s.disrupted_pods)
    assert recorded.disruptions_allowed == 0 and set(recorded.disrupted_pods) == {"kv-0"}
    wait_for(lambda: allowed(policy, ns) == 0)
    wait_for(lambda: not policy.read_namespaced_pod_disruption_budget("kv", ns).status.disrupted_pods)

    code, body = refused(lambda: core.create_namespaced_pod_eviction("kv-1", ns, eviction("kv-1", ns)))
    assert code == 429
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                    "reason": "TooManyRequests",
                    "details": {"causes": [{"reason": "DisruptionBudget",
                                            "message": "The disruption budget kv needs 2 healthy pods and has 2 "
                                                       "currently"}]},
                    "code": 429}
    assert core.read_namespaced_pod("kv-1", ns).metadata.deletion_timestamp is None


def test_dry_run_eviction_changes_nothing(core, policy, ns):
    ready_pods(core, ns, 2)
    budget(policy, ns, maxUnavailable=1)
    wait_for(lambda: allowed(policy, ns) == 1)
    core.create_namespaced_pod_eviction("kv-0", ns, eviction("kv-0", ns, dry_run=["All"]))
    assert core.read_namespaced_pod("kv-0", ns).metadata.deletion_timestamp is None
    assert allowed(policy, ns) == 1


def test_two_budgets_are_a_500_and_no_budget_just_deletes(core, policy, ns):
    ready_pods(core, ns, 2)
    budget(policy, ns, "one", minAvailable=1)
    budget(policy, ns, "two", minAvailable=1)
    code, body = refused(lambda: core.create_namespaced_pod_eviction("kv-0", ns, eviction("kv-0", ns)))
    assert (code, body) == (500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": "This pod has more than one PodDisruptionBudget, which the eviction "
                                             "subresource does not support.", "code": 500})
    ready_pods(core, ns, 1, labels={"app": "other"}, prefix="free")
    core.create_namespaced_pod_eviction("free-0", ns, eviction("free-0", ns))
    assert core.read_namespaced_pod("free-0", ns).metadata.deletion_timestamp is not None


def test_a_budget_not_yet_observed_is_still_being_processed(core, policy, ns):
    ready_pods(core, ns, 1)
    rt = policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": "kv"}, "spec": {
        "selector": {"matchLabels": LABELS}, "minAvailable": 0}})
    assert rt.metadata.generation == 1
    wait_for(lambda: allowed(policy, ns) == 1)
    policy.patch_namespaced_pod_disruption_budget("kv", ns, {"spec": {"minAvailable": 1}})
    pdb = policy.read_namespaced_pod_disruption_budget("kv", ns)
    if pdb.status.observed_generation < pdb.metadata.generation:  # the controller has not caught up yet
        code, body = refused(lambda: core.create_namespaced_pod_eviction("kv-0", ns, eviction("kv-0", ns)))
        assert code == 429 and body["details"]["retryAfterSeconds"] == 10
        assert body["details"]["causes"][0]["message"] == "The disruption budget kv is still being processed by " \
                                                          "the server."
    wait_for(lambda: allowed(policy, ns) == 0)
    code, body = refused(lambda: core.create_namespaced_pod_eviction("kv-0", ns, eviction("kv-0", ns)))
    assert code == 429 and "retryAfterSeconds" not in body["details"]


def test_pending_and_unready_pods_are_evicted_without_taking_from_the_budget(core, policy, ns):
    ready_pods(core, ns, 3)
    budget(policy, ns, minAvailable=2)
    wait_for(lambda: allowed(policy, ns) == 1)
    core.patch_namespaced_pod("kv-2", ns, {"metadata": {"annotations": {"kubesim.io/ready": "false"}}})
    wait_for(lambda: allowed(policy, ns) == 0)
    core.create_namespaced_pod_eviction("kv-2", ns, eviction("kv-2", ns))  # unready, and 2 >= 2 healthy
    assert core.read_namespaced_pod("kv-2", ns).metadata.deletion_timestamp is not None
    core.create_namespaced_pod(ns, {"metadata": {"name": "stuck", "labels": LABELS}, "spec": {
        "nodeSelector": {"nowhere": "true"}, "containers": [{"name": "c", "image": "kv:1"}]}})
    core.create_namespaced_pod_eviction("stuck", ns, eviction("stuck", ns))  # Pending: no budget check
    wait_for(lambda: not core.list_namespaced_pod(ns, field_selector="metadata.name=stuck").items)


def test_bad_eviction_bodies_are_400(core, ns):
    ready_pods(core, ns, 1)
    code, body = refused(lambda: core.create_namespaced_pod_eviction("kv-0", ns, eviction("other", ns)))
    assert (code, body["message"]) == (400, "name in URL does not match name in Eviction object")
    code, _ = refused(lambda: core.create_namespaced_pod_eviction("nope", ns, eviction("nope", ns)))
    assert code == 404
