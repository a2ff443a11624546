"""deploy/kustomize: both overlays build with `kubectl kustomize`; production's output (PodDisruptionBudgets and the
retention CronJob included) applies to kubesim with the CRDs and the generated RBAC, and it holds together
(selectors match, secrets only referenced, probes, resources, a leader-election standby, a retention command the
real command accepts, the audit key from a Secret); the sandbox runs one pod per process without budgets."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from kubesim.testing import running_kubesim, wait_for
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from tests.deploy.kustomize import build

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "crds"


def _docs(directory: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    """The production overlay (every process twice, with its budget)."""
    return build("production")


@pytest.fixture(scope="module")
def sandbox() -> list[dict[str, Any]]:
    return build("sandbox")


@pytest.fixture(params=["production", "sandbox"])
def overlay(request: pytest.FixtureRequest, manifests: list[dict[str, Any]],
            sandbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each overlay's output in turn, for what both must hold."""
    return manifests if request.param == "production" else sandbox


def _of(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def _deployment(manifests: list[dict[str, Any]], component: str) -> dict[str, Any]:
    (dep,) = [d for d in _of(manifests, "Deployment") if d["metadata"]["name"] == f"opsconsole-{component}"]
    return dep


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod template's spec of a Deployment or a CronJob."""
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def _workloads(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [*_of(manifests, "Deployment"), *_of(manifests, "CronJob")]


def _containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = _pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


@pytest.fixture(scope="module")
def applied(manifests: list[dict[str, Any]]) -> Iterator[tuple[Any, list[dict[str, Any]]]]:
    """Every CRD and manifest created on a fresh kubesim, in file order: (api client, created objects)."""
    with running_kubesim() as k:
        api = k.api_client()
        created = []
        for doc in [*_docs(CRDS), *manifests]:
            kind = kube.kind_for(api, doc["apiVersion"], doc["kind"], refresh=True)
            assert kind is not None, f"kubesim serves no {doc['kind']} in {doc['apiVersion']}"
            created.append(kube.create_object(api, kind, doc))
        yield api, created


def test_every_manifest_and_crd_is_accepted_by_the_api(applied: tuple[Any, list[dict[str, Any]]],
                                                       manifests: list[dict[str, Any]]) -> None:
    _, created = applied
    assert len(created) == len(manifests) + len(_docs(CRDS))
    names = {(o["kind"], o["metadata"]["name"]) for o in created}
    assert ("ClusterRole", "opsconsole") in names and ("ClusterRoleBinding", "opsconsole") in names
    assert ("CustomResourceDefinition", "memcacheds.cache.example.com") in names
    assert {("PodDisruptionBudget", f"opsconsole-{c}") for c in ("web", "worker", "controller")} <= names
    assert ("CronJob", "opsconsole-retention") in names


def test_the_api_serves_back_the_budgets_and_the_retention_schedule(applied: tuple[Any, list[dict[str, Any]]]
                                                                    ) -> None:
    api, _ = applied
    pdbs = ResourceKind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
    served = {p["metadata"]["name"]: p["spec"] for p in kube.list_objects(api, pdbs, "opsconsole").items}
    assert served["opsconsole-web"]["minAvailable"] == 1 and served["opsconsole-worker"]["maxUnavailable"] == 1

    def budgets() -> dict[str, tuple[int, int]] | None:
        items = kube.list_objects(api, pdbs, "opsconsole").items
        status = {p["metadata"]["name"]: p.get("status") or {} for p in items}
        if any(s.get("currentHealthy") != 2 for s in status.values()):
            return None
        return {n: (s["expectedPods"], s["disruptionsAllowed"]) for n, s in status.items()}

    # two replicas each, once Ready: every budget lets exactly one pod go (a rollout or a node drain one at a time)
    assert wait_for(budgets, timeout=30) == {f"opsconsole-{c}": (2, 1)
                                             for c in ("web", "worker", "controller", "webhooks")}
    cronjobs = ResourceKind("batch", "v1", "cronjobs", "CronJob")
    (cron,) = kube.list_objects(api, cronjobs, "opsconsole").items
    assert cron["spec"]["schedule"] == "17 3 * * *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["metadata"]["generation"] == 1


Applied = tuple[Any, list[dict[str, Any]]]


def test_the_deployments_roll_out_pods_running_as_the_service_account(applied: Applied) -> None:
    api, _ = applied
    pods = ResourceKind("", "v1", "pods", "Pod")

    def controller_pods() -> list[dict[str, Any]]:
        return kube.list_objects(api, pods, "opsconsole",
                                 label_selector="app.kubernetes.io/component=controller").items

    found = wait_for(lambda: len(controller_pods()) == 2 and controller_pods(), timeout=20)
    assert all(p["spec"]["serviceAccountName"] == "opsconsole" for p in found)
    web = kube.list_objects(api, pods, "opsconsole", label_selector="app.kubernetes.io/component=web").items
    assert web and all(p["spec"]["initContainers"][0]["command"][-2:] == ["migrate", "--noinput"] for p in web)


def test_the_binding_grants_the_generated_role_to_the_service_account(overlay: list[dict[str, Any]]) -> None:
    (binding,) = _of(overlay, "ClusterRoleBinding")
    (role,) = _of(overlay, "ClusterRole")
    (sa,) = _of(overlay, "ServiceAccount")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]
    for workload in _workloads(overlay):
        assert _pod_spec(workload)["serviceAccountName"] == sa["metadata"]["name"]


def test_no_secret_values_are_committed_only_references(overlay: list[dict[str, Any]]) -> None:
    assert not _of(overlay, "Secret")
    for cm in _of(overlay, "ConfigMap"):
        assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"} & set(cm["data"])
    for workload in _workloads(overlay):
        for container in _containers(workload):
            refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in
                    e.get("valueFrom", {})}
            assert set(refs) >= {"SECRET_KEY", "DATABASE_URL"}, container["name"]
            assert all(r["name"] == "opsconsole-secrets" for r in refs.values())
            assert not any("value" in e and e["name"] in refs for e in container["env"])


def test_web_probes_healthz_for_liveness_and_readyz_for_readiness(overlay: list[dict[str, Any]]) -> None:
    (web,) = _deployment(overlay, "web")["spec"]["template"]["spec"]["containers"]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    hosts = {h["value"] for p in ("livenessProbe", "readinessProbe") for h in web[p]["httpGet"]["httpHeaders"]}
    (config,) = _of(overlay, "ConfigMap")
    assert hosts <= set(config["data"]["ALLOWED_HOSTS"].split(","))


def test_every_container_has_requests_and_limits_and_runs_unprivileged(overlay: list[dict[str, Any]]) -> None:
    for workload in _workloads(overlay):
        assert _pod_spec(workload)["securityContext"]["runAsNonRoot"] is True
        for c in _containers(workload):
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and {"cpu", "memory"} <= set(
                c["resources"]["limits"]), c["name"]
            assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_controller_runs_a_standby_with_the_lease_in_its_own_namespace(manifests: list[dict[str, Any]]) -> None:
    dep = _deployment(manifests, "controller")
    assert dep["spec"]["replicas"] == 2
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["OPSCONSOLE_LEADER_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_services_and_disruption_budgets_select_existing_pods(manifests: list[dict[str, Any]]) -> None:
    pod_labels = [d["spec"]["template"]["metadata"]["labels"] for d in _of(manifests, "Deployment")]
    for svc in _of(manifests, "Service"):
        assert any(svc["spec"]["selector"].items() <= labels.items() for labels in pod_labels), svc["metadata"]
    pdbs = _of(manifests, "PodDisruptionBudget")
    assert {p["metadata"]["name"] for p in pdbs} == {"opsconsole-web", "opsconsole-worker", "opsconsole-controller",
                                                     "opsconsole-webhooks"}
    for pdb in pdbs:
        sel = pdb["spec"]["selector"]["matchLabels"]
        assert any(sel.items() <= labels.items() for labels in pod_labels)
        assert ("minAvailable" in pdb["spec"]) != ("maxUnavailable" in pdb["spec"])
    ports = {p["port"] for s in _of(manifests, "Service") for p in s["spec"]["ports"]}
    assert {9101, 9102} <= ports


@pytest.mark.django_db
def test_the_retention_cronjob_runs_the_real_command_with_flags_it_accepts(manifests: list[dict[str, Any]]) -> None:
    (cron,) = _of(manifests, "CronJob")
    pod = _pod_spec(cron)
    (container,) = pod["containers"]
    assert container["command"][:3] == ["python", "manage.py", "retention"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False  # database only
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    out = io.StringIO()
    call_command(*container["command"][2:], "--dry-run", stdout=out)  # refuses unknown flags or bad values
    assert out.getvalue().startswith("would delete") and "transitions are never deleted" in out.getvalue()


def test_the_webhook_server_serves_only_the_api_server_and_its_probes_need_no_client_certificate(
        manifests: list[dict[str, Any]]) -> None:
    (deployment,) = [d for d in _of(manifests, "Deployment") if d["metadata"]["name"] == "opsconsole-webhooks"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert "--insecure-skip-client-verify" not in command
    client_ca = command[command.index("--client-ca") + 1]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = mounts[client_ca.rsplit("/", 1)[0]]
    (source,) = [v for v in pod["volumes"] if v["name"] == volume]
    assert source["secret"]["secretName"] == "opsconsole-webhooks-client-ca"
    metrics_port = int(command[command.index("--metrics-port") + 1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == metrics_port != ports["https"]
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] == "metrics" and get.get("scheme", "HTTP") == "HTTP"
    services = {s["metadata"]["name"]: s for s in _of(manifests, "Service")}
    assert [p["targetPort"] for p in services["opsconsole-webhooks"]["spec"]["ports"]] == ["https"]
    assert [p["targetPort"] for p in services["opsconsole-webhooks-metrics"]["spec"]["ports"]] == ["metrics"]


def test_both_overlays_build_every_process_from_the_same_base(manifests: list[dict[str, Any]],
                                                              sandbox: list[dict[str, Any]]) -> None:
    def names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in docs}

    deployments = {("Deployment", f"opsconsole-{c}") for c in ("web", "worker", "controller", "webhooks")}
    assert deployments <= names(manifests) and deployments <= names(sandbox)
    # the sandbox drops only the budgets
    assert names(manifests) - names(sandbox) == {("PodDisruptionBudget", f"opsconsole-{c}")
                                                 for c in ("web", "worker", "controller", "webhooks")}
    assert not _of(sandbox, "PodDisruptionBudget")
    assert {d["spec"]["replicas"] for d in _of(sandbox, "Deployment")} == {1}
    assert {d["spec"]["replicas"] for d in _of(manifests, "Deployment")} == {2}
    (config,) = _of(sandbox, "ConfigMap")
    assert config["data"]["LOG_FORMAT"] == "plain"
    (config,) = _of(manifests, "ConfigMap")
    assert config["data"]["LOG_FORMAT"] == "json"


def test_production_pins_the_image_and_mounts_the_audit_key_from_a_secret(manifests: list[dict[str, Any]]) -> None:
    images = {c["image"] for w in _workloads(manifests) for c in _containers(w)}
    assert images == {"opsconsole:0.1.0"}
    pod = _pod_spec(_deployment(manifests, "controller"))
    (container,) = pod["containers"]
    key_file = {e["name"]: e.get("value") for e in container["env"]}["OPSCONSOLE_AUDIT_KEY_FILE"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    mount = mounts[key_file.rsplit("/", 1)[0]]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "opsconsole-audit-key"
