"""deploy/kustomize/components/extra-cluster and the overlay that uses it, overlays/two-clusters (issue 41,
docs/operations.md "Many clusters"): production plus cluster-2's own controller (`runcontroller --cluster cluster-2
--context cluster-2`, its kubeconfig Secret mounted, the audit key as production's controller has it), the
workers and the web mounting that Secret after the pods' own cluster's kubeconfig, which is the very file the Helm
chart renders. Built with `kubectl kustomize`; nothing else of production changes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesim.testing import running_kubesim
from reconcilers.engine import kube
from tests.deploy.kustomize import build
from tests.deploy.test_helm_chart import _one, _pod_spec, chart, render

__all__ = ["chart"]  # the module-scoped fixture, shared

Docs = list[dict[str, Any]]
IN_CLUSTER = "/etc/opsconsole/in-cluster/kubeconfig"
CLUSTER_2 = "/etc/opsconsole/clusters/cluster-2/kubeconfig"
ADDED = {("ConfigMap", "opsconsole-in-cluster-kubeconfig"), ("Deployment", "opsconsole-controller-cluster-2"),
         ("Service", "opsconsole-controller-cluster-2-metrics"),
         ("PodDisruptionBudget", "opsconsole-controller-cluster-2")}


@pytest.fixture(scope="module")
def production() -> Docs:
    return build("production")


@pytest.fixture(scope="module")
def two() -> Docs:
    return build("two-clusters")


def _names(docs: Docs) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container["env"]}


def _mounted_secrets(pod: dict[str, Any]) -> dict[str, str]:
    """mount path -> Secret name, for the first container's Secret mounts."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    return {m["mountPath"]: secrets[m["name"]] for m in pod["containers"][0]["volumeMounts"] if m["name"] in secrets}


def test_the_overlay_is_production_plus_cluster_2s_controller(production: Docs, two: Docs) -> None:
    assert _names(two) - _names(production) == ADDED
    assert _names(production) <= _names(two)
    images = {c["image"] for d in two if d["kind"] == "Deployment" for c in _pod_spec(d)["containers"]}
    assert images == {c["image"] for d in production if d["kind"] == "Deployment"
                      for c in _pod_spec(d)["containers"]}  # production's pin, cluster-2's controller included


def test_cluster_2s_controller_runs_production_s_controller_for_its_cluster(production: Docs, two: Docs) -> None:
    ours = _one(two, "Deployment", "opsconsole-controller-cluster-2")
    theirs = _one(production, "Deployment", "opsconsole-controller")
    (container,), (source,) = _pod_spec(ours)["containers"], _pod_spec(theirs)["containers"]
    assert container["command"] == ["python", "manage.py", "runcontroller", "--cluster", "cluster-2",
                                    "--context", "cluster-2"]
    env = _env(container)
    assert env["KUBECONFIG"] == f"{IN_CLUSTER}:{CLUSTER_2}"
    assert {k: v for k, v in env.items() if k != "KUBECONFIG"} == _env(source)  # the audit key file included
    for field in ("ports", "livenessProbe", "resources", "securityContext", "envFrom", "imagePullPolicy"):
        assert container[field] == source[field], field
    secret = {"/etc/opsconsole/clusters/cluster-2": "opsconsole-kubeconfig-cluster-2"}
    assert _mounted_secrets(_pod_spec(ours)) == {**_mounted_secrets(_pod_spec(theirs)), **secret}
    assert ours["spec"]["replicas"] == theirs["spec"]["replicas"] == 2
    # its own selector, served by its own metrics Service and budget; the default's never adopts its pods
    selector = ours["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/component"] == "controller-cluster-2"
    labels = ours["spec"]["template"]["metadata"]["labels"]
    assert not set(theirs["spec"]["selector"]["matchLabels"].items()) <= set(labels.items())
    assert _one(two, "Service", "opsconsole-controller-cluster-2-metrics")["spec"]["selector"] == selector
    assert _one(two, "PodDisruptionBudget", "opsconsole-controller-cluster-2")["spec"]["selector"]["matchLabels"] \
        == selector


def _without_clusters(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod spec less the entries the component adds."""
    pod = copy.deepcopy(pod)
    container = pod["containers"][0]
    container["env"] = [e for e in container["env"] if e["name"] != "KUBECONFIG"]
    added = ("in-cluster-kubeconfig", "kubeconfig-cluster-2")
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] not in added]
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] not in added]
    return pod


@pytest.mark.parametrize("name", ["opsconsole-worker", "opsconsole-web"])
def test_the_workers_and_the_web_mount_cluster_2s_kubeconfig_after_their_own(production: Docs, two: Docs,
                                                                             name: str) -> None:
    pod = _pod_spec(_one(two, "Deployment", name))
    assert _env(pod["containers"][0])["KUBECONFIG"] == f"{IN_CLUSTER}:{CLUSTER_2}"
    assert _mounted_secrets(pod) == {"/etc/opsconsole/clusters/cluster-2": "opsconsole-kubeconfig-cluster-2"}
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/etc/opsconsole/in-cluster"] == "in-cluster-kubeconfig"
    assert _without_clusters(pod) == _pod_spec(_one(production, "Deployment", name))  # nothing else changes


def test_the_in_cluster_kubeconfig_is_the_one_the_helm_chart_renders(two: Docs, chart: Any) -> None:
    ours = _one(two, "ConfigMap", "opsconsole-in-cluster-kubeconfig")["data"]["kubeconfig"]
    docs = render(chart, clusters=[{"name": "cluster-2", "kubeconfigSecret": "opsconsole-kubeconfig-cluster-2"}])
    assert ours == _one(docs, "ConfigMap", "opsconsole-in-cluster-kubeconfig")["data"]["kubeconfig"]
    helm_worker = _pod_spec(_one(docs, "Deployment", "opsconsole-worker"))
    assert _env(helm_worker["containers"][0])["KUBECONFIG"] == f"{IN_CLUSTER}:{CLUSTER_2}"  # the same paths


def test_an_api_server_accepts_what_the_component_adds_and_patches(two: Docs) -> None:
    patched = {("Deployment", "opsconsole-worker"), ("Deployment", "opsconsole-web")}
    wanted = ADDED | patched | {("Namespace", "opsconsole")}
    docs = [d for d in two if (d["kind"], d["metadata"]["name"]) in wanted]
    assert len(docs) == len(wanted)
    with running_kubesim() as k:
        api = k.api_client()
        for doc in sorted(docs, key=lambda d: d["kind"] != "Namespace"):
            kind = kube.kind_for(api, doc["apiVersion"], doc["kind"], refresh=True)
            assert kind is not None, doc["kind"]
            created = kube.create_object(api, kind, doc)
            assert created["metadata"]["name"] == doc["metadata"]["name"]
            if doc["kind"] == "Deployment":  # served back as written: the patched lists kept their entries
                assert _pod_spec(created)["volumes"] == _pod_spec(doc)["volumes"]
                assert _env(_pod_spec(created)["containers"][0]) == _env(_pod_spec(doc)["containers"][0])
