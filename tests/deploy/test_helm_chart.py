"""deploy/helm/opsconsole, with Helm's own library (helm-python-sdk, no helm binary): the chart lints, its values
schema refuses bad values, it renders offline, and it installs (and upgrades) for real into a kubesim of this
module's own, where the workloads roll out and the ClusterRole and webhook configurations are exactly what the
registered kinds generate. The chart's crds/ and files/ link to the repository's generated files, which must be
what `manage.py crds`, `rbac` and `webhooks` print: a drift fails here. The pod specs must
match the kustomize production overlay's (the two ways of installing run the same processes)."""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from django.core.management import CommandError, call_command

from kubesim.testing import KubesimHandle, running_kubesim, wait_for
from reconcilers.core.crd import crd_yaml
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, registry
from reconcilers.engine.rbac import cluster_role
from reconcilers.engine.webhook_config import webhook_configurations
from tests.deploy.kustomize import build
from tests.fixtures.cluster import POD_DELAYS

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "opsconsole"
PRODUCTION = ROOT / "deploy" / "kustomize" / "overlays" / "production"
RELEASE = NAMESPACE = "opsconsole"
VALUES = {"database": {"url": "postgres://opsconsole:pw@postgres.example:5432/opsconsole"},
          "redis": {"url": "redis://redis.example:6379/0"}}
COMPONENTS = ("web", "worker", "controller", "webhooks")

Docs = list[dict[str, Any]]


def _docs(rendered: dict[str, str]) -> Docs:
    return [d for name, text in rendered.items() if not name.endswith("NOTES.txt")
            for d in yaml.safe_load_all(text) if d]


def _one(docs: Docs, kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, **values: Any) -> Docs:
    return _docs(chart.render({**VALUES, **values}, name=RELEASE, namespace=NAMESPACE, is_install=True))


@pytest.fixture(scope="module")
def rendered(chart: Any) -> Docs:
    return render(chart)


# --- the chart itself, offline ---------------------------------------------------------------------------------


def test_the_chart_lints_clean_in_strict_mode() -> None:
    report = helm.lint(CHART, VALUES, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []  # 2 warning, 3 error


def test_the_values_schema_refuses_wrong_types_unknown_keys_and_names_the_field(chart: Any) -> None:
    chart.validate_schema(VALUES)
    with pytest.raises(helm.HelmValuesError, match="replicas"):
        chart.validate_schema({**VALUES, "web": {"replicas": "two"}})
    with pytest.raises(helm.HelmValuesError, match="replica"):
        chart.validate_schema({**VALUES, "worker": {"replica": 3}})  # a typo is not silently ignored
    with pytest.raises(helm.HelmValuesError, match="prometheusOperator"):
        chart.validate_schema({**VALUES, "monitoring": {"prometheusOperator": "yes"}})


def test_the_database_and_redis_urls_are_required_unless_an_existing_secret_holds_them(chart: Any) -> None:
    with pytest.raises(helm.HelmError, match="database.url is required"):
        chart.render({"redis": VALUES["redis"]}, name=RELEASE, namespace=NAMESPACE)
    docs = _docs(chart.render({"existingSecret": "mine"}, name=RELEASE, namespace=NAMESPACE))
    assert not [d for d in docs if d["metadata"]["name"] == "opsconsole-secrets"]
    web = _pod_spec(_one(docs, "Deployment", "opsconsole-web"))["containers"][0]
    assert {e["valueFrom"]["secretKeyRef"]["name"] for e in web["env"] if "valueFrom" in e} == {"mine"}


LINKS = {"crds": "deploy/crds", "files/rbac.yaml": "deploy/kustomize/base/rbac.yaml",
         "files/webhooks.yaml": "deploy/webhooks/configurations.yaml",
         "files/alerts.yml": "deploy/prometheus/alerts.yml", "files/slo.yml": "deploy/prometheus/slo.yml",
         "files/opsconsole-dashboard.json": "deploy/grafana/opsconsole-dashboard.json"}


def test_the_chart_links_to_the_generated_files_and_they_are_what_the_kinds_generate(chart: Any) -> None:
    for link, target in LINKS.items():
        path = CHART / link
        assert path.is_symlink() and path.resolve() == (ROOT / target).resolve(), link
        assert not Path(os.readlink(path)).is_absolute(), link  # a checkout anywhere keeps it
    assert sorted(c["name"] for c in chart.crds) == sorted(f"crds/{p.name}" for p in (ROOT / "deploy" /
                                                                                          "crds").glob("*.yaml"))
    out = io.StringIO()
    for command, copy in (("crds", CHART / "crds"), ("rbac", CHART / "files" / "rbac.yaml"),
                          ("webhooks", CHART / "files" / "webhooks.yaml")):
        try:
            call_command(command, "--check", str(copy), stdout=out)
        except CommandError as exc:
            pytest.fail(f"{exc}\n(`make generate` rewrites every generated file)")
    try:
        call_command("slo_rules", "--check", str(CHART / "files" / "slo.yml"), stdout=out)
    except CommandError as exc:
        pytest.fail(f"{exc}\n(`make generate` rewrites every generated file)")


def _kustomize_production() -> Docs:
    return build("production")


def test_the_pod_specs_are_the_kustomize_production_overlays(rendered: Docs) -> None:
    """Commands, ports, probes, resources, security contexts, env and mounts of every container, container by
    container (the image aside: the overlay pins a tag, the chart uses its appVersion)."""
    base = _kustomize_production()
    fields = ("command", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext",
              "imagePullPolicy")
    for kind, name in [*(("Deployment", f"opsconsole-{c}") for c in COMPONENTS),
                       ("CronJob", "opsconsole-retention")]:
        ours, theirs = _pod_spec(_one(rendered, kind, name)), _pod_spec(_one(base, kind, name))
        for key in ("securityContext", "automountServiceAccountToken", "terminationGracePeriodSeconds",
                    "restartPolicy", "affinity"):
            if key == "affinity" and key in theirs:  # the same anti-affinity, on the chart's own selector
                term = ours[key]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
                assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
                continue
            assert ours.get(key) == theirs.get(key), (name, key)
        for group in ("initContainers", "containers"):
            assert [c["name"] for c in ours.get(group, [])] == [c["name"] for c in theirs.get(group, [])]
            for mine, source in zip(ours.get(group, []), theirs.get(group, []), strict=True):
                for field in fields:
                    assert mine.get(field) == source.get(field), (name, mine["name"], field)
                assert {e["name"] for e in mine["env"]} == {e["name"] for e in source["env"]}, (name, mine["name"])
                assert {m["mountPath"] for m in mine["volumeMounts"]} == {m["mountPath"] for m in
                                                                          source["volumeMounts"]}, mine["name"]


def test_the_audit_key_is_a_mounted_secret_only_the_controller_reads(rendered: Docs) -> None:
    assert "OPSCONSOLE_AUDIT_KEY_FILE" not in _one(rendered, "ConfigMap", "opsconsole-config")["data"]
    for component in ("web", "worker", "webhooks"):
        pod = _pod_spec(_one(rendered, "Deployment", f"opsconsole-{component}"))
        assert not [v for v in pod["volumes"] if "audit" in v["name"]], component
    pod = _pod_spec(_one(rendered, "Deployment", "opsconsole-controller"))
    (container,) = pod["containers"]
    key_file = {e["name"]: e.get("value") for e in container["env"]}["OPSCONSOLE_AUDIT_KEY_FILE"]
    mount = {m["mountPath"]: m for m in container["volumeMounts"]}[key_file.rsplit("/", 1)[0]]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    secret = _one(rendered, "Secret", volume["secret"]["secretName"])
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "audit-signing.key" in secret["data"]


def test_cert_manager_makes_the_certificate_and_injects_its_ca(chart: Any) -> None:
    docs = render(chart, webhooks={"certManager": {"enabled": True}})
    cert = _one(docs, "Certificate", "opsconsole-webhooks")
    assert "opsconsole-webhooks.opsconsole.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"] == {"kind": "Issuer", "name": "opsconsole-webhooks"}
    assert _one(docs, "Issuer", "opsconsole-webhooks")["spec"] == {"selfSigned": {}}
    pod = _pod_spec(_one(docs, "Deployment", "opsconsole-webhooks"))
    assert {"name": "tls", "secret": {"secretName": cert["spec"]["secretName"]}} in pod["volumes"]
    assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "opsconsole-webhooks-tls"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = _one(docs, kind, "opsconsole")
        assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "opsconsole/opsconsole-webhooks"}
        assert all("caBundle" not in w["clientConfig"] for w in config["webhooks"])
    mine = render(chart, webhooks={"certManager": {"enabled": True, "issuerRef": {"kind": "ClusterIssuer",
                                                                                   "name": "corp-ca"}}})
    assert not [d for d in mine if d["kind"] == "Issuer"]
    assert _one(mine, "Certificate", "opsconsole-webhooks")["spec"]["issuerRef"]["name"] == "corp-ca"


def test_prometheus_operator_objects_carry_the_alert_rules_and_the_dashboard_is_for_the_sidecar(
        chart: Any, rendered: Docs) -> None:
    assert not [d for d in rendered if d["apiVersion"].startswith("monitoring.coreos.com")]  # auto, none served
    docs = render(chart, monitoring={"prometheusOperator": "enabled", "labels": {"release": "kps"}})
    rule = _one(docs, "PrometheusRule", "opsconsole")
    alerts, slo = (yaml.safe_load((ROOT / "deploy" / "prometheus" / name).read_text(encoding="utf-8"))
                   for name in ("alerts.yml", "slo.yml"))
    assert slo["groups"]  # the generated SLO rules travel with the hand-written alerts
    assert rule["spec"]["groups"] == alerts["groups"] + slo["groups"]
    assert rule["metadata"]["labels"]["release"] == "kps"
    monitor = _one(docs, "ServiceMonitor", "opsconsole-web")
    web = _one(docs, "Service", "opsconsole-web")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= web["metadata"]["labels"].items()
    for component in ("worker", "controller", "webhooks"):
        pod_monitor = _one(docs, "PodMonitor", f"opsconsole-{component}")
        template = _one(docs, "Deployment", f"opsconsole-{component}")["spec"]["template"]
        assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        ports = {p["name"] for c in template["spec"]["containers"] for p in c["ports"]}
        assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] in ports
    dashboard = _one(rendered, "ConfigMap", "opsconsole-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["opsconsole-dashboard.json"]) == json.loads(
        (ROOT / "deploy" / "grafana" / "opsconsole-dashboard.json").read_text(encoding="utf-8"))


def test_the_kept_inputs_retention_reaches_every_process_from_the_values(chart: Any, rendered: Docs) -> None:
    config = _one(rendered, "ConfigMap", "opsconsole-config")["data"]
    assert config["OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS"] == "14"
    mine = render(chart, retention={"inputsDays": 3})
    assert _one(mine, "ConfigMap", "opsconsole-config")["data"]["OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS"] == "3"
    with pytest.raises(helm.HelmValuesError, match="inputsDays"):
        render(chart, retention={"inputsDays": 0})


def test_an_extra_kinds_image_reaches_every_process(chart: Any) -> None:
    docs = render(chart, extraKinds={"image": "registry.example/website-kind:1.2", "reconcilers":
                                     ["website.kind.WebsiteReconciler"], "rbacRules": [
                                         {"apiGroups": ["web.example.com"], "resources": ["websites"],
                                          "verbs": ["get", "list", "watch"]}]})
    config = _one(docs, "ConfigMap", "opsconsole-config")["data"]
    assert config["OPSCONSOLE_RECONCILERS"] == "website.kind.WebsiteReconciler"
    assert config["PYTHONPATH"] == "/opt/opsconsole/kinds"
    for workload in [d for d in docs if d["kind"] in ("Deployment", "CronJob")]:
        pod = _pod_spec(workload)
        (init,) = [c for c in pod["initContainers"] if c["name"] == "extra-kinds"]
        assert init["image"] == "registry.example/website-kind:1.2"
        for container in pod["containers"]:
            assert {"name": "kinds", "mountPath": "/opt/opsconsole/kinds", "readOnly": True} in container[
                "volumeMounts"], workload["metadata"]["name"]
    rules = _one(docs, "ClusterRole", "opsconsole")["rules"]
    assert rules[-1]["apiGroups"] == ["web.example.com"] and rules[:-1] == cluster_role()["rules"]


# --- installed into kubesim ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[KubesimHandle]:
    """A kubesim of this module's own, over TLS (Go's client sends a bearer token only over TLS), with short pod
    delays; the chart's CRDs are installed by Helm, so none are preinstalled."""
    with running_kubesim(tls=True, mode="process", **POD_DELAYS) as handle:
        yield handle


@pytest.fixture(scope="module")
def installed(cluster: KubesimHandle) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """`helm install opsconsole deploy/helm/opsconsole -n opsconsole --create-namespace --wait`: (the Helm config,
    an ApiClient, the release)."""
    api = kube.build_api_client(cluster.kubeconfig)
    with helm.Config(kubeconfig_path=cluster.kubeconfig, namespace=NAMESPACE) as config:
        release = config.install(str(CHART), RELEASE, VALUES, namespace=NAMESPACE, create_namespace=True,
                                 wait="watcher", timeout=60)
        yield config, api, release
    api.close()


def test_the_release_is_deployed_with_its_crds_and_every_workload_rolled_out(installed: Any) -> None:
    config, api, release = installed
    assert release["status"] == "deployed" and release["revision"] == 1
    assert [r["name"] for r in config.list()] == [RELEASE]
    crds = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                        namespaced=False)
    served = {c["metadata"]["name"]: c for c in kube.list_objects(api, crds, None).items}
    kinds = registry.registered()
    assert kinds
    for rec in kinds:  # each kind's CRD as `manage.py crds` generates it, installed from crds/
        want = yaml.safe_load(crd_yaml(rec))
        got = served[want["metadata"]["name"]]
        assert got["spec"]["names"]["kind"] == want["spec"]["names"]["kind"]
        assert [(v["name"], v["served"], v["storage"], v["schema"]) for v in got["spec"]["versions"]] == [
            (v["name"], v["served"], v["storage"], v["schema"]) for v in want["spec"]["versions"]]
    deployments = ResourceKind("apps", "v1", "deployments", "Deployment")
    ready = {d["metadata"]["name"]: (d.get("status") or {}).get("readyReplicas")
             for d in kube.list_objects(api, deployments, NAMESPACE).items}
    assert ready == {f"opsconsole-{c}": 2 for c in COMPONENTS}  # --wait returned only once they were


def test_the_installed_controller_runs_the_rendered_pod_spec_as_the_service_account(installed: Any,
                                                                                    rendered: Docs) -> None:
    _, api, _ = installed
    deployments = ResourceKind("apps", "v1", "deployments", "Deployment")
    live = kube.get_object(api, deployments, NAMESPACE, "opsconsole-controller")
    spec = live["spec"]["template"]["spec"]
    (want,) = _pod_spec(_one(rendered, "Deployment", "opsconsole-controller"))["containers"]
    (got,) = spec["containers"]
    for field in ("command", "livenessProbe", "resources", "securityContext", "volumeMounts", "envFrom"):
        assert got[field] == want[field], field
    assert spec["serviceAccountName"] == "opsconsole" and spec["securityContext"]["runAsNonRoot"] is True
    assert {"name": "OPSCONSOLE_LEADER_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in [
        {k: v for k, v in e.items() if k in ("name", "valueFrom")} for e in got["env"]]
    pods = ResourceKind("", "v1", "pods", "Pod")
    running = kube.list_objects(api, pods, NAMESPACE, label_selector="app.kubernetes.io/component=controller").items
    assert len(running) == 2 and all(p["spec"]["serviceAccountName"] == "opsconsole" for p in running)


def test_the_installed_cluster_role_is_the_generated_least_privilege_one(installed: Any) -> None:
    _, api, _ = installed
    roles = ResourceKind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
    bindings = ResourceKind("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                            namespaced=False)
    assert kube.get_object(api, roles, None, "opsconsole")["rules"] == cluster_role()["rules"]
    binding = kube.get_object(api, bindings, None, "opsconsole")
    assert binding["roleRef"]["name"] == "opsconsole"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "opsconsole", "namespace": NAMESPACE}]


def _secret(api: Any, name: str) -> dict[str, bytes]:
    secrets = ResourceKind("", "v1", "secrets", "Secret")
    data = kube.get_object(api, secrets, NAMESPACE, name)["data"]
    return {k: base64.b64decode(v) for k, v in data.items()}


def test_the_installed_webhook_configurations_are_the_generated_ones_with_the_generated_ca(installed: Any) -> None:
    from cryptography import x509

    _, api, _ = installed
    tls = _secret(api, "opsconsole-webhooks-tls")
    kinds = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
             "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
    for want in webhook_configurations(ca_bundle=tls["ca.crt"]):
        kind = ResourceKind("admissionregistration.k8s.io", "v1", kinds[want["kind"]], want["kind"],
                            namespaced=False)
        got = kube.get_object(api, kind, None, want["metadata"]["name"])
        assert len(got.get("webhooks") or []) == len(want["webhooks"])
        for live, generated in zip(got.get("webhooks") or [], want["webhooks"], strict=True):
            assert {k: live.get(k) for k in generated} == generated
    # the serving certificate is the CA's, for the Service the configurations call
    ca = x509.load_pem_x509_certificate(tls["ca.crt"])
    cert = x509.load_pem_x509_certificate(tls["tls.crt"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    assert "opsconsole-webhooks.opsconsole.svc" in names


def test_an_upgrade_keeps_the_generated_secrets_and_changes_what_the_values_change(installed: Any,
                                                                                   tmp_path: Path) -> None:
    config, api, _ = installed
    before = {n: _secret(api, n) for n in ("opsconsole-secrets", "opsconsole-audit-key", "opsconsole-webhooks-tls")}
    release = config.upgrade(str(CHART), RELEASE, {**VALUES, "worker": {"replicas": 3}}, namespace=NAMESPACE,
                             timeout=60)
    assert release["revision"] == 2 and release["status"] == "deployed"
    after = {n: _secret(api, n) for n in before}
    assert after == before  # SECRET_KEY, the audit key and the webhook CA survive an upgrade
    deployments = ResourceKind("apps", "v1", "deployments", "Deployment")
    assert wait_for(lambda: kube.get_object(api, deployments, NAMESPACE, "opsconsole-worker")["spec"]["replicas"]
                    == 3, timeout=10)
    # the generated audit key is one the checkpoint code loads (Ed25519, PEM)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = serialization.load_pem_private_key(after["opsconsole-audit-key"]["audit-signing.key"], password=None)
    assert isinstance(key, Ed25519PrivateKey)


def _crd(kind: str, plural: str) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.monitoring.coreos.com"},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_monitoring_objects_appear_once_the_cluster_serves_the_prometheus_operators_kinds(
        installed: Any, cluster: KubesimHandle) -> None:
    _, api, release = installed
    kinds = {d["kind"] for d in yaml.safe_load_all(release["manifest"]) if d}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule"}  # auto, and none served at install
    crds = kube.kind_for(api, "apiextensions.k8s.io/v1", "CustomResourceDefinition", refresh=True)
    for kind, plural in (("ServiceMonitor", "servicemonitors"), ("PodMonitor", "podmonitors"),
                         ("PrometheusRule", "prometheusrules")):
        kube.create_object(api, crds, _crd(kind, plural))
    assert wait_for(lambda: kube.kind_for(api, "monitoring.coreos.com/v1", "PrometheusRule", refresh=True),
                    timeout=10)
    # a fresh Helm client, as a new `helm upgrade` is (one caches the cluster's discovery for its lifetime)
    with helm.Config(kubeconfig_path=cluster.kubeconfig, namespace=NAMESPACE) as config:
        preview = config.upgrade(str(CHART), RELEASE, VALUES, namespace=NAMESPACE, dry_run="server")
    docs = [d for d in yaml.safe_load_all(preview["manifest"]) if d]
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "PodMonitor") == [
        "opsconsole-controller", "opsconsole-webhooks", "opsconsole-worker"]
    assert {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("ServiceMonitor", "PrometheusRule")
            } == {("ServiceMonitor", "opsconsole-web"), ("PrometheusRule", "opsconsole")}


def test_the_chart_test_asks_the_web_service_for_readiness(rendered: Docs) -> None:
    pod = _one(rendered, "Pod", "opsconsole-test-web")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    assert "http://opsconsole-web:80/readyz" in container["command"][-1]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("values", [
    {"webhooks": {"enabled": False}, "web": {"migrate": False, "pdb": None}, "retention": {"enabled": False},
     "grafana": {"dashboard": False}},
    {"web": {"ingress": {"enabled": True, "className": "nginx", "tlsSecret": "web-tls"}, "trustedProxies":
             "10.244.0.0/16"}, "webhooks": {"insecureSkipClientVerify": True}, "allowedHosts": ["ops.example"]},
], ids=["minimal", "ingress-and-no-client-ca"])
def test_other_values_render_valid_objects(chart: Any, values: dict[str, Any]) -> None:
    docs = render(chart, **values)
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert all(d.get("apiVersion") and d.get("kind") and d["metadata"].get("name") for d in docs)
    web = _pod_spec(_one(docs, "Deployment", "opsconsole-web"))
    if values.get("webhooks", {}).get("enabled") is False:
        assert not {n for n in names if "webhook" in n[1].lower() or "Webhook" in n[0]}
        assert ("PodDisruptionBudget", "opsconsole-web") not in names and "initContainers" not in web
        assert ("CronJob", "opsconsole-retention") not in names
        assert ("ConfigMap", "opsconsole-dashboard") not in names
    else:
        ingress = _one(docs, "Ingress", "opsconsole-web")
        assert ingress["spec"]["tls"] == [{"hosts": ["opsconsole.example.com"], "secretName": "web-tls"}]
        env = {e["name"]: e.get("value") for e in web["containers"][0]["env"]}
        assert env["OPSCONSOLE_TRUSTED_PROXIES"] == "10.244.0.0/16"
        hosts = _one(docs, "ConfigMap", "opsconsole-config")["data"]["ALLOWED_HOSTS"].split(",")
        assert hosts == ["localhost", "opsconsole-web", "opsconsole-web.opsconsole.svc", "ops.example"]
        (server,) = _pod_spec(_one(docs, "Deployment", "opsconsole-webhooks"))["containers"]
        assert "--insecure-skip-client-verify" in server["command"] and "--client-ca" not in server["command"]
        assert "/client-ca" not in {m["mountPath"] for m in server["volumeMounts"]}


def test_the_chart_and_the_production_overlay_deploy_the_version_being_released(chart: Any) -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert chart.metadata["appVersion"] == version
    overlay = yaml.safe_load((PRODUCTION / "kustomization.yaml").read_text(encoding="utf-8"))
    assert overlay["images"] == [{"name": "opsconsole", "newTag": version}]
