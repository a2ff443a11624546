"""kubectl against the kubeconfig kubesim writes (skipped only when kubectl is not on PATH)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesim.testing import KubesimHandle, running_kubesim, wait_for

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
CR = """
apiVersion: example.com/v1
kind: Gizmo
metadata: {name: g1}
spec: {size: 3}
"""
DEPLOY = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: "nginx:1.27", ports: [{containerPort: 80}]}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KubesimHandle]:
    """A kubesim serving TLS, since kubectl only sends bearer tokens over TLS."""
    with running_kubesim(tls=True, schedule_delay=0.01, start_delay=0.05, ready_delay=0.05) as k:
        yield k


@pytest.fixture(scope="module")
def kubectl(cluster, tmp_path_factory):
    home = tmp_path_factory.mktemp("kubectl-home")
    env = dict(os.environ, KUBECONFIG=cluster.kubeconfig, HOME=str(home))

    def run(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([KUBECTL, "--cache-dir", str(home / "cache"), *args], input=stdin, env=env,
                              capture_output=True, text=True, timeout=30)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    run.env = env  # type: ignore[attr-defined]
    run.home = home  # type: ignore[attr-defined]
    return run


def test_api_resources_lists_builtins(kubectl):
    out = kubectl("api-resources").stdout
    for line in ("deployments", "customresourcedefinitions", "leases", "pods"):
        assert line in out
    assert "Unhandled Error" not in kubectl("api-resources").stderr


def test_get_namespaces_prints_a_table(kubectl):
    out = kubectl("get", "namespaces").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "AGE"]
    assert any(line.startswith("default ") and "Active" in line for line in out[1:])


def test_apply_a_crd_and_a_cr_then_get_with_printer_columns(kubectl, tmp_path):
    (tmp_path / "crd.yaml").write_text(CRD)
    (tmp_path / "cr.yaml").write_text(CR)
    assert "created" in kubectl("apply", "-f", str(tmp_path / "crd.yaml")).stdout
    assert "gizmo.example.com/g1 created" in kubectl("apply", "-f", str(tmp_path / "cr.yaml")).stdout
    assert "unchanged" in kubectl("apply", "-f", str(tmp_path / "cr.yaml")).stdout
    lines = kubectl("get", "gizmos").stdout.splitlines()
    assert lines[0].split() == ["NAME", "SIZE", "AGE"] and lines[1].split()[:2] == ["g1", "3"]
    doc = yaml.safe_load(kubectl("get", "gz", "g1", "-o", "yaml").stdout)
    assert doc["spec"] == {"size": 3} and doc["metadata"]["generation"] == 1
    assert "kubectl.kubernetes.io/last-applied-configuration" in doc["metadata"]["annotations"]
    bad = kubectl("apply", "-f", "-", stdin=CR.replace("size: 3", "size: 0"), check=False)
    assert bad.returncode != 0 and "spec.size" in bad.stderr


def test_patch_merge_annotate_describe_delete(kubectl, tmp_path):
    # the Gizmo CRD on its own (it is usually there from the test above: "unchanged"), served before the CR is
    # applied: under load, this test has twice found kubectl's mapping without the kind (cause not found)
    kubectl("apply", "-f", "-", stdin=CRD)
    wait_for(lambda: kubectl("get", "gizmos", check=False).returncode == 0, timeout=10)
    kubectl("apply", "-f", "-", stdin=CR.replace("g1", "g2"))
    assert "patched" in kubectl("patch", "gizmo", "g2", "--type=merge", "-p", '{"spec":{"size":5}}').stdout
    assert "annotated" in kubectl("annotate", "gizmo", "g2", "opsconsole.io/reconcile-requested-at=now").stdout
    got = json.loads(kubectl("get", "gizmo", "g2", "-o", "json").stdout)
    assert got["spec"]["size"] == 5 and got["metadata"]["generation"] == 2
    assert got["metadata"]["annotations"]["opsconsole.io/reconcile-requested-at"] == "now"
    described = kubectl("describe", "gizmo", "g2").stdout
    assert "Name:         g2" in described and "Size:  5" in described
    assert 'gizmo.example.com "g2" deleted' in kubectl("delete", "gizmo", "g2").stdout
    assert kubectl("get", "gizmo", "g2", check=False).returncode != 0


def test_client_side_apply_of_a_deployment_uses_strategic_merge(kubectl, cluster):
    assert "created" in kubectl("apply", "-f", "-", stdin=DEPLOY.replace("REPLICAS", "1")).stdout
    assert "unchanged" in kubectl("apply", "-f", "-", stdin=DEPLOY.replace("REPLICAS", "1")).stdout
    assert "configured" in kubectl("apply", "-f", "-", stdin=DEPLOY.replace("REPLICAS", "2")).stdout
    wait_for(lambda: kubectl("get", "deploy", "web", "-o", "jsonpath={.status.availableReplicas}").stdout == "2")
    lines = kubectl("get", "deploy", "web").stdout.splitlines()
    assert lines[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert lines[1].split()[:4] == ["web", "2/2", "2", "2"]
    pods = kubectl("get", "pods", "-l", "app=web").stdout
    assert pods.count("Running") == 2
    described = kubectl("describe", "deployment", "web").stdout
    assert "ScalingReplicaSet" in described
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-",
                                           stdin=DEPLOY.replace("REPLICAS", "3")).stdout


def test_get_watch_prints_new_objects(kubectl, tmp_path):
    proc = subprocess.Popen([KUBECTL, "--cache-dir", str(kubectl.home / "cache"), "get", "configmaps", "-w",
                             "--request-timeout=20s"], env=kubectl.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        kubectl("create", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: watched}\n")
        deadline = time.monotonic() + 10
        seen = ""
        while time.monotonic() < deadline and "watched" not in seen:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
        assert "watched" in seen, seen
    finally:
        proc.terminate()
        proc.wait(10)


def test_kubectl_with_a_wrong_token_is_refused(cluster, tmp_path):
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    doc["users"][0]["user"] = {"token": "wrong"}
    (tmp_path / "kc").write_text(yaml.safe_dump(doc))
    proc = subprocess.run([KUBECTL, "--kubeconfig", str(tmp_path / "kc"), "--cache-dir", str(tmp_path / "c"),
                           "get", "pods"], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, HOME=str(tmp_path)))
    assert proc.returncode != 0
    assert "You must be logged in to the server" in proc.stderr


def test_reapplying_with_a_container_and_an_env_var_removed_drops_them(kubectl):
    two = DEPLOY.replace("name: web", "name: two").replace("app: web", "app: two").replace("REPLICAS", "1")
    both = two.replace('ports: [{containerPort: 80}]}',
                       'env: [{name: A, value: "1"}, {name: B, value: "2"}]}\n      - {name: side, image: "busybox:1"}')
    kubectl("apply", "-f", "-", stdin=both)
    one = two.replace('ports: [{containerPort: 80}]}', 'env: [{name: B, value: "3"}]}')
    kubectl("apply", "-f", "-", stdin=one)
    got = json.loads(kubectl("get", "deploy", "two", "-o", "json").stdout)
    containers = got["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app"]
    assert containers[0]["env"] == [{"name": "B", "value": "3"}]
    assert got["metadata"]["generation"] == 2


def test_typed_create_commands_send_protobuf_and_work(kubectl):
    kubectl("create", "namespace", "made-by-kubectl")
    kubectl("create", "configmap", "cfg", "--from-literal=a=b", "-n", "made-by-kubectl")
    kubectl("create", "secret", "generic", "sec", "--from-literal=password=hunter2", "-n", "made-by-kubectl")
    kubectl("create", "serviceaccount", "robot", "-n", "made-by-kubectl")
    cm = json.loads(kubectl("get", "cm", "cfg", "-n", "made-by-kubectl", "-o", "json").stdout)
    assert cm["data"] == {"a": "b"}
    sec = json.loads(kubectl("get", "secret", "sec", "-n", "made-by-kubectl", "-o", "json").stdout)
    assert sec["data"] == {"password": "aHVudGVyMg=="} and sec["type"] == "Opaque"
    # kinds the protobuf decoder does not cover are refused with 415, not misread
    bad = kubectl("create", "quota", "q", "--hard=pods=2", "-n", "made-by-kubectl", check=False)
    assert bad.returncode != 0 and "unknown format" in bad.stderr
    kubectl("delete", "namespace", "made-by-kubectl")
    assert kubectl("get", "namespace", "made-by-kubectl", check=False).returncode != 0


def test_create_deployment_and_services_send_protobuf_and_are_stored_as_sent(kubectl):
    ns = ("-n", "pb-apps")
    kubectl("create", "namespace", "pb-apps")
    kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80", *ns)
    web = json.loads(kubectl("get", "deploy", "web", "-o", "json", *ns).stdout)
    assert web["metadata"]["labels"] == {"app": "web"}
    assert web["spec"]["replicas"] == 2 and web["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert web["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    [container] = web["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "nginx" and container["image"] == "nginx:1.27"
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    # a pointer field set to zero is on the wire and kept; a command after -- is the container's command
    kubectl("create", "deployment", "idle", "--image=busybox:1.36", "--replicas=0", *ns, "--", "sleep", "3600")
    idle = json.loads(kubectl("get", "deploy", "idle", "-o", "json", *ns).stdout)
    assert idle["spec"]["replicas"] == 0
    assert idle["spec"]["template"]["spec"]["containers"][0]["command"] == ["sleep", "3600"]

    kubectl("create", "service", "clusterip", "web", "--tcp=80:8080", *ns)
    svc = json.loads(kubectl("get", "svc", "web", "-o", "json", *ns).stdout)
    assert svc["spec"]["ports"] == [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}]
    assert svc["spec"]["selector"] == {"app": "web"} and svc["spec"]["type"] == "ClusterIP"
    kubectl("create", "service", "nodeport", "web-np", "--tcp=80:http", "--node-port=30123", *ns)
    np = json.loads(kubectl("get", "svc", "web-np", "-o", "json", *ns).stdout)
    assert np["spec"]["type"] == "NodePort"
    assert np["spec"]["ports"] == [{"name": "80-http", "protocol": "TCP", "port": 80, "targetPort": "http",
                                    "nodePort": 30123}]

    # what kubectl sends as protobuf is stored as the same object sent as JSON would be
    for args in (("deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80"),
                 ("service", "clusterip", "web", "--tcp=80:8080")):
        sent = json.loads(kubectl("create", *args, "--dry-run=client", "-o", "json", *ns).stdout)
        sent["metadata"]["name"] += "-json"
        kubectl("create", "-f", "-", *ns, stdin=json.dumps(sent))
        kind = "deploy" if args[0] == "deployment" else "svc"
        as_json = json.loads(kubectl("get", kind, "web-json", "-o", "json", *ns).stdout)["spec"]
        as_protobuf = json.loads(kubectl("get", kind, "web", "-o", "json", *ns).stdout)["spec"]
        for spec in (as_json, as_protobuf):
            spec.pop("clusterIP", None), spec.pop("clusterIPs", None)
        assert as_protobuf == as_json

    # a server-side dry run decodes the body, answers the object and stores nothing
    dry = yaml.safe_load(kubectl("create", "deployment", "dry", "--image=nginx:1.27", "--replicas=3",
                                 "--dry-run=server", "-o", "yaml", *ns).stdout)
    assert dry["kind"] == "Deployment" and dry["metadata"]["name"] == "dry" and dry["spec"]["replicas"] == 3
    assert dry["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert kubectl("get", "deploy", "dry", *ns, check=False).returncode != 0
    kubectl("delete", "namespace", "pb-apps")


def test_create_cronjob_and_jobs_send_protobuf(kubectl):
    ns = ("-n", "pb-batch")
    kubectl("create", "namespace", "pb-batch")
    kubectl("create", "cronjob", "tick", "--image=busybox", "--schedule=*/1 * * * *", *ns, "--", "echo", "hi")
    cj = json.loads(kubectl("get", "cronjob", "tick", "-o", "json", *ns).stdout)
    assert cj["spec"]["schedule"] == "*/1 * * * *"
    job_template = cj["spec"]["jobTemplate"]
    assert job_template["metadata"]["name"] == "tick"
    pod = job_template["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert [(c["name"], c["image"], c["command"]) for c in pod["containers"]] == [("tick", "busybox", ["echo", "hi"])]

    kubectl("create", "job", "once", "--image=busybox", *ns, "--", "echo", "hi")
    job = json.loads(kubectl("get", "job", "once", "-o", "json", *ns).stdout)
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "busybox" and container["command"] == ["echo", "hi"] and "args" not in container
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"

    # --from=cronjob: kubectl copies the job template (as kubesim defaulted it) and adds the annotation and
    # the controller reference
    kubectl("create", "job", "by-hand", "--from=cronjob/tick", *ns)
    manual = json.loads(kubectl("get", "job", "by-hand", "-o", "json", *ns).stdout)
    assert manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    [owner] = manual["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": cj["metadata"]["uid"],
                     "controller": True}
    copied = manual["spec"]["template"]["spec"]
    assert copied["containers"][0]["command"] == ["echo", "hi"] and copied["restartPolicy"] == "OnFailure"
    assert copied["containers"] == pod["containers"]
    kubectl("delete", "namespace", "pb-batch")


BATCH_AND_POLICY = """
apiVersion: v1
kind: Namespace
metadata: {name: batchpol}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: batchpol}
spec:
  schedule: "17 3 * * *"
  timeZone: Etc/UTC
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: task, image: "busybox:1.36", command: ["true"]}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: batchpol}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
"""


def test_get_cronjobs_and_pdb_print_kubectls_columns(kubectl, tmp_path):
    (tmp_path / "bp.yaml").write_text(BATCH_AND_POLICY)
    out = kubectl("apply", "-f", str(tmp_path / "bp.yaml")).stdout
    assert "cronjob.batch/nightly created" in out and "poddisruptionbudget.policy/web created" in out
    cj = kubectl("get", "cronjobs", "-n", "batchpol").stdout.splitlines()
    assert cj[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert cj[1].split()[:9] == ["nightly", "17", "3", "*", "*", "*", "Etc/UTC", "False", "0"]
    wide = kubectl("get", "cj", "-n", "batchpol", "-o", "wide").stdout.splitlines()
    assert "IMAGES" in wide[0] and "busybox:1.36" in wide[1]
    pdb = kubectl("get", "pdb", "-n", "batchpol").stdout.splitlines()
    assert pdb[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert pdb[1].split()[:4] == ["web", "1", "N/A", "0"]
    def pdb_version() -> str:
        return json.loads(kubectl("get", "pdb", "web", "-n", "batchpol", "-o", "json").stdout)["metadata"][
            "resourceVersion"]

    before = pdb_version()
    again = kubectl("apply", "-f", str(tmp_path / "bp.yaml")).stdout
    assert "cronjob.batch/nightly unchanged" in again
    # the PDB's selector has patchStrategy "replace": kubectl always sends it (a real apiserver then says
    # "configured" too), and the object does not change
    assert pdb_version() == before
    bad = kubectl("apply", "-f", "-", check=False, stdin=BATCH_AND_POLICY.replace('"17 3 * * *"', '"17 25 * * *"'))
    assert bad.returncode != 0 and "spec.schedule" in bad.stderr and "above maximum (23)" in bad.stderr
    kubectl("delete", "namespace", "batchpol")


def test_kubectl_explain_reads_a_crds_fields_from_openapi_v3(kubectl):
    crd = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "memcached.yaml"
    kubectl("apply", "-f", str(crd))
    wait_for(lambda: kubectl("explain", "memcacheds", check=False).returncode == 0, timeout=10)
    preferred = kubectl("explain", "memcacheds.spec").stdout  # the group's preferred version: beta before alpha
    assert "KIND:       Memcached" in preferred and "VERSION:    v1beta1" in preferred
    assert "replicas\t<integer> -required-" in preferred and "container\t<Object>" in preferred
    spec = kubectl("explain", "memcacheds.spec", "--api-version=cache.example.com/v1alpha1").stdout
    assert "KIND:       Memcached" in spec and "VERSION:    v1alpha1" in spec
    assert "size\t<integer> -required-" in spec and "Number of memcached replicas." in spec
    size = kubectl("explain", "memcacheds.spec.size", "--api-version=cache.example.com/v1alpha1").stdout
    assert "FIELD: size <integer>" in size
    top = kubectl("explain", "memcacheds").stdout
    assert "metadata\t<ObjectMeta>" in top and "apiVersion\t<string>" in top


def test_kubectl_auth_can_i_is_answered_as_always_allow_does(kubectl):
    assert kubectl("auth", "can-i", "list", "pods").stdout.strip() == "yes"
    assert kubectl("auth", "can-i", "delete", "memcacheds.cache.example.com", "-n", "team-a").stdout.strip() == "yes"
    rules = kubectl("auth", "can-i", "--list").stdout
    assert "*.*" in rules and "[*]" in rules


DRAINED = """
apiVersion: v1
kind: Pod
metadata: {name: w, namespace: drain, labels: {app: w}}
spec:
  nodeSelector: {kubernetes.io/hostname: kubesim-node-1}
  containers: [{name: c, image: "w:1"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: w, namespace: drain}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: w}}
"""


def test_kubectl_drain_cordons_the_node_and_evicts_its_pods_through_the_eviction_api(kubectl):
    kubectl("create", "namespace", "drain")
    kubectl("apply", "-f", "-", stdin=DRAINED)
    wait_for(lambda: kubectl("get", "pod", "w", "-n", "drain", "-o", "jsonpath={.status.phase}").stdout == "Running")
    wait_for(lambda: kubectl("get", "pdb", "w", "-n", "drain", "-o",
                             "jsonpath={.status.disruptionsAllowed}").stdout == "1")
    try:
        out = kubectl("drain", "kubesim-node-1", "--force", "--ignore-daemonsets", "--timeout=20s")
        assert "node/kubesim-node-1 cordoned" in out.stdout and "pod/w evicted" in out.stdout
        assert "node/kubesim-node-1 drained" in out.stdout
        assert kubectl("get", "node", "kubesim-node-1", "-o", "jsonpath={.spec.unschedulable}").stdout == "true"
        assert "Ready,SchedulingDisabled" in kubectl("get", "node", "kubesim-node-1").stdout
        assert kubectl("get", "pod", "w", "-n", "drain", check=False).returncode != 0
    finally:
        kubectl("uncordon", "kubesim-node-1")
        kubectl("delete", "namespace", "drain", "--wait=false")
