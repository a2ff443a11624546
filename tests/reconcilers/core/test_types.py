"""Request keys round-trip, conditions follow metav1 rules, results and errors validate their arguments."""

from __future__ import annotations

import pytest

from reconcilers.core.clusters import DEFAULT_CLUSTER, cluster_name_check, key_join, key_split
from reconcilers.core.reconciler import ResourceKind
from reconcilers.core.types import Condition, PermanentError, Request, Result, TemporaryError


def test_a_request_key_round_trips_for_namespaced_cluster_scoped_and_core_objects() -> None:
    for request in (
        Request("cache.example.com", "v1alpha1", "memcacheds", "default", "web"),
        Request("tenancy.example.com", "v1alpha1", "tenants", "", "acme"),
        Request("", "v1", "configmaps", "kube-system", "cfg"),
    ):
        assert Request.from_key(request.key()) == request


@pytest.mark.parametrize("key", ["", "a/b", "g/v/p/ns/", "g//p/ns/n", "g/v/p/ns/n/extra/more", "G/v/p/ns/n/x"])
def test_malformed_keys_are_rejected(key: str) -> None:
    with pytest.raises(ValueError):
        Request.from_key(key)


def test_resource_kind_builds_requests_and_api_versions() -> None:
    tenant = ResourceKind("tenancy.example.com", "v1alpha1", "tenants", "Tenant", namespaced=False)
    assert tenant.api_version == "tenancy.example.com/v1alpha1"
    assert tenant.request("ignored", "acme").namespace == ""
    assert ResourceKind("", "v1", "pods", "Pod").api_version == "v1"


def test_conditions_require_a_valid_status_and_a_camel_case_reason() -> None:
    assert Condition("Ready", "True", "AllReplicasReady").status == "True"
    with pytest.raises(ValueError):
        Condition("Ready", "Yes", "AllReplicasReady")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Condition("Ready", "True", "not camel")


def test_results_and_errors_refuse_negative_delays() -> None:
    with pytest.raises(ValueError):
        Result(requeue_after=-1)
    with pytest.raises(ValueError):
        TemporaryError("later", delay=-5)
    err = PermanentError("spec.size must be positive", reason="InvalidSpec")
    assert (err.reason, err.message) == ("InvalidSpec", "spec.size must be positive")


def test_a_key_in_another_cluster_carries_its_name_and_the_default_clusters_key_is_unchanged():
    local = Request.from_key("apps/v1/deployments/ns/web")
    assert local.cluster == DEFAULT_CLUSTER and local.key() == "apps/v1/deployments/ns/web"
    remote = Request.from_key("prod-eu-1/apps/v1/deployments/ns/web")
    assert (remote.cluster, remote.local_key()) == ("prod-eu-1", "apps/v1/deployments/ns/web")
    assert remote.key() == "prod-eu-1/apps/v1/deployments/ns/web" and remote != local
    assert Request("", "v1", "configmaps", "", "x", cluster="b").key() == "b//v1/configmaps//x"
    for bad in ("Prod/apps/v1/deployments/ns/web", "a/b/apps/v1/deployments/ns/web", "-x/apps/v1/d/ns/web"):
        with pytest.raises(ValueError):
            Request.from_key(bad)
    assert key_split("c1/g/v/p/n/x") == ("c1", "g/v/p/n/x") and key_join(DEFAULT_CLUSTER, "g/v/p/n/x") == "g/v/p/n/x"
    with pytest.raises(ValueError, match="DNS label"):
        cluster_name_check("x" * 64)
