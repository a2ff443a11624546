"""deploy/helm/opsconsole's `clusters` values (issue 41, docs/operations.md "Many clusters"): each cluster beside
the one the chart is installed in gets its own controller Deployment (`runcontroller --cluster NAME --context
CTX`) with its kubeconfig Secret mounted, the workers and the web mount every cluster's, and KUBECONFIG lists a
kubeconfig of the pods' own service account first, so that the default cluster stays the one they run in. The
engine's own client builder (`kube.build_api_client`) reads that list as the pods would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from reconcilers.engine import kube
from tests.deploy.test_helm_chart import CHART, NAMESPACE, RELEASE, VALUES, _one, _pod_spec, chart, render

__all__ = ["chart"]  # the module-scoped fixture, shared

CLUSTERS = [{"name": "prod-eu", "kubeconfigSecret": "kubeconfig-prod-eu"},
            {"name": "staging", "context": "stg", "kubeconfigSecret": "kubeconfig-staging"}]
IN_CLUSTER = "/etc/opsconsole/in-cluster/kubeconfig"


def _container(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return _pod_spec(_one(docs, "Deployment", name))["containers"][0]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container["env"]}


def _secret_mounts(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    """mount path -> Secret name of a Deployment's kubeconfig Secrets."""
    pod = _pod_spec(_one(docs, "Deployment", name))
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    return {m["mountPath"]: secrets[m["name"]] for m in pod["containers"][0]["volumeMounts"]
            if m["name"].startswith("kubeconfig-")}


@pytest.fixture(scope="module")
def two(chart: Any) -> list[dict[str, Any]]:
    return render(chart, clusters=CLUSTERS, monitoring={"prometheusOperator": "enabled"})


def test_each_cluster_gets_its_own_controller_with_its_own_kubeconfig_secret(two: list[dict[str, Any]]) -> None:
    controllers = sorted(d["metadata"]["name"] for d in two if d["kind"] == "Deployment"
                         and d["metadata"]["name"].startswith("opsconsole-controller"))
    assert controllers == ["opsconsole-controller", "opsconsole-controller-prod-eu", "opsconsole-controller-staging"]
    for cluster, context in (("prod-eu", "prod-eu"), ("staging", "stg")):  # the context defaults to the name
        name = f"opsconsole-controller-{cluster}"
        container = _container(two, name)
        assert container["command"] == ["python", "manage.py", "runcontroller", "--cluster", cluster,
                                        "--context", context]
        assert _env(container)["KUBECONFIG"] == f"{IN_CLUSTER}:/etc/opsconsole/clusters/{cluster}/kubeconfig"
        assert _secret_mounts(two, name) == {f"/etc/opsconsole/clusters/{cluster}": f"kubeconfig-{cluster}"}
        paths = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/etc/opsconsole/in-cluster", "/etc/opsconsole/audit-key"} <= paths
        # its own selector: the default controller's Deployment never adopts its pods, nor it theirs
        selector = _one(two, "Deployment", name)["spec"]["selector"]["matchLabels"]
        assert selector["app.kubernetes.io/component"] == f"controller-{cluster}"
        assert _one(two, "PodMonitor", name)["spec"]["selector"]["matchLabels"] == selector
        assert _one(two, "PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"] == selector
    # the default cluster's controller is as without clusters: in-cluster, no kubeconfig
    default = _container(two, "opsconsole-controller")
    assert default["command"] == ["python", "manage.py", "runcontroller"] and "KUBECONFIG" not in _env(default)


def test_the_workers_and_the_web_mount_every_clusters_kubeconfig_after_their_own(two: list[dict[str, Any]],
                                                                                   rendered: Any) -> None:
    listed = f"{IN_CLUSTER}:/etc/opsconsole/clusters/prod-eu/kubeconfig:/etc/opsconsole/clusters/staging/kubeconfig"
    for name in ("opsconsole-worker", "opsconsole-web"):
        assert _env(_container(two, name))["KUBECONFIG"] == listed, name
        assert _secret_mounts(two, name) == {"/etc/opsconsole/clusters/prod-eu": "kubeconfig-prod-eu",
                                             "/etc/opsconsole/clusters/staging": "kubeconfig-staging"}, name
        # without clusters nothing changes: in-cluster config, no kubeconfig at all
        assert "KUBECONFIG" not in _env(_container(rendered, name)) and not _secret_mounts(rendered, name)
    assert not [d for d in rendered if d["metadata"]["name"] == "opsconsole-in-cluster-kubeconfig"]


@pytest.fixture(scope="module")
def rendered(chart: Any) -> list[dict[str, Any]]:
    return render(chart)


def test_the_chart_with_clusters_lints_clean_in_strict_mode() -> None:
    report = helm.lint(CHART, {**VALUES, "clusters": CLUSTERS}, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("entry, field", [
    ({"name": "Prod_EU", "kubeconfigSecret": "s"}, "name"),          # not a DNS label
    ({"name": "default", "kubeconfigSecret": "s"}, "name"),          # the cluster the chart is installed in
    ({"name": "a" * 41, "kubeconfigSecret": "s"}, "name"),           # room for controller-<name> in a label
    ({"name": "prod"}, "kubeconfigSecret"),                           # required
    ({"name": "prod", "kubeconfigSecret": "s", "kubeconfig": "x"}, "kubeconfig"),  # unknown key
], ids=["not-a-dns-label", "default", "too-long", "no-secret", "unknown-key"])
def test_the_values_schema_refuses_a_bad_cluster_entry_and_names_the_field(chart: Any, entry: dict[str, Any],
                                                                           field: str) -> None:
    chart.validate_schema({**VALUES, "clusters": CLUSTERS})
    with pytest.raises(helm.HelmValuesError, match=field):
        chart.validate_schema({**VALUES, "clusters": [entry]})


def test_a_cluster_named_twice_is_refused_at_render(chart: Any) -> None:
    with pytest.raises(helm.HelmError, match="prod-eu"):
        chart.render({**VALUES, "clusters": [CLUSTERS[0], {**CLUSTERS[0], "kubeconfigSecret": "other"}]},
                     name=RELEASE, namespace=NAMESPACE, is_install=True)


def test_the_pods_kubeconfig_list_reaches_the_default_cluster_as_the_service_account_and_others_by_context(
        two: list[dict[str, Any]], tmp_path: Path) -> None:
    """The rendered in-cluster kubeconfig, its service account paths moved under tmp_path, then a cluster's
    kubeconfig: no context is the pods' own cluster with the account's token and CA; a context is that cluster."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "ca.crt").write_text("not parsed here")
    text = _one(two, "ConfigMap", "opsconsole-in-cluster-kubeconfig")["data"]["kubeconfig"]
    own = tmp_path / "in-cluster"
    own.write_text(text.replace("/var/run/secrets/kubernetes.io/serviceaccount", str(account)))
    other = tmp_path / "prod-eu"
    other.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod-eu",
        "clusters": [{"name": "prod-eu", "cluster": {"server": "https://prod-eu.example:6443"}}],
        "users": [{"name": "prod-eu", "user": {"token": "prod-token"}}],
        "contexts": [{"name": "prod-eu", "context": {"cluster": "prod-eu", "user": "prod-eu"}}]}))
    listed = f"{own}:{other}"
    default = kube.build_api_client(listed).configuration
    assert default.host == "https://kubernetes.default.svc"
    assert default.api_key["BearerToken"] == "Bearer sa-token"
    assert default.ssl_ca_cert == str(account / "ca.crt")
    prod = kube.build_api_client(listed, "prod-eu").configuration
    assert prod.host == "https://prod-eu.example:6443" and prod.api_key["BearerToken"] == "Bearer prod-token"
