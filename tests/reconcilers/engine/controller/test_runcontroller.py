"""`manage.py runcontroller --bootstrap`: CRDs then samples, create-if-missing; a clean SIGTERM exit
that releases the Lease."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from kubesim.testing import wait_for
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.engine.controller import LEASE, LEASE_NAME
from reconcilers.engine.controller.bootstrap import CRD, BootstrapError, bootstrap
from tests.reconcilers.engine.controller.kinds import GADGET, NAMESPACE, crd
from tests.support import workers


def write_manifests(tmp_path: Path, crds: list[dict], samples: list[dict]) -> tuple[Path, Path]:
    crds_dir, samples_dir = tmp_path / "crds", tmp_path / "samples"
    crds_dir.mkdir()
    samples_dir.mkdir()
    for c in crds:
        (crds_dir / f"{c['metadata']['name']}.yaml").write_text(yaml.safe_dump(c))
    (samples_dir / "10-gadgets.yaml").write_text(yaml.safe_dump_all(samples))
    return crds_dir, samples_dir


def gadget(name, namespace=None, size=1):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": GADGET.api_version, "kind": GADGET.kind, "metadata": meta, "spec": {"size": size}}


def test_bootstrap_applies_crds_then_samples_and_never_overwrites(api, tmp_path):
    kind = ResourceKind(f"b{uuid.uuid4().hex[:6]}.test.opsconsole.io", "v1", "boxes", "Box", namespaced=False)
    ns = f"boot-{uuid.uuid4().hex[:6]}"
    box = {"apiVersion": kind.api_version, "kind": "Box", "metadata": {"name": "one"}, "spec": {"size": 1}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": ns}}
    crds_dir, samples_dir = write_manifests(tmp_path, [crd(kind)], [box, configmap, namespace])

    report = bootstrap(api, crds_dir, samples_dir, api_timeout=5)
    assert report.served == [f"boxes.{kind.group}"]
    assert sorted(report.created) == sorted(
        [f"CustomResourceDefinition boxes.{kind.group}", "Box one", f"Namespace {ns}", f"ConfigMap {ns}/cm"])
    assert kube.get_object(api, kind, None, "one")["spec"] == {"size": 1}

    kube.patch_object(api, kind, None, "one", {"spec": {"size": 7}})  # a user's change
    again = bootstrap(api, crds_dir, samples_dir, api_timeout=5)
    assert again.created == [] and len(again.existing) == 4
    assert kube.get_object(api, kind, None, "one")["spec"] == {"size": 7}


def test_install_crds_applies_the_generated_crds_and_brings_a_changed_one_in_line(api, tmp_path):
    from typing import ClassVar

    from pydantic import Field

    from reconcilers.core.crd import crd_manifest
    from reconcilers.core.kind import KindModel
    from tests.reconcilers.engine.controller.kinds import GadgetReconciler

    group = f"i{uuid.uuid4().hex[:6]}.test.opsconsole.io"

    class CrateSpec(KindModel):
        size: int = Field(1, le=5)

    class CrateReconciler(GadgetReconciler):
        resource: ClassVar[ResourceKind] = ResourceKind(group, "v1", "crates", "Crate", namespaced=False)
        spec_model: ClassVar = CrateSpec

    report = bootstrap(api, None, tmp_path, generated=[crd_manifest(CrateReconciler)], api_timeout=5)
    assert report.served == [f"crates.{group}"] and report.created == [f"CustomResourceDefinition crates.{group}"]
    kind = CrateReconciler.resource
    with pytest.raises(kube.ApiException) as refused:
        kube.create_object(api, kind, {"apiVersion": kind.api_version, "kind": "Crate", "metadata": {"name": "big"},
                                       "spec": {"size": 9}})
    assert refused.value.status == 422 and "spec.size" in refused.value.body

    class BiggerSpec(KindModel):
        size: int = Field(1, le=50)

    CrateReconciler.spec_model = BiggerSpec  # the model changed: the next start brings the CRD in line
    again = bootstrap(api, None, tmp_path, generated=[crd_manifest(CrateReconciler)], api_timeout=5)
    assert again.existing == [f"CustomResourceDefinition crates.{group}"]
    created = kube.create_object(api, kind, {"apiVersion": kind.api_version, "kind": "Crate",
                                             "metadata": {"name": "big"}, "spec": {"size": 9}})
    assert created["spec"] == {"size": 9}


def test_bootstrap_names_a_sample_of_a_kind_nobody_serves(api, tmp_path):
    crds_dir, samples_dir = write_manifests(
        tmp_path, [], [{"apiVersion": "nope.example.com/v1", "kind": "Nope", "metadata": {"name": "x"}}])
    with pytest.raises(BootstrapError, match="Nope"):
        bootstrap(api, crds_dir, samples_dir, api_timeout=5)


@pytest.mark.django_db(transaction=True)
def test_runcontroller_bootstraps_leads_mirrors_and_releases_the_lease_on_sigterm(
    running_kubesim, api, tmp_path, redis_client
):
    from reconcilers.models import Resource

    ns = f"rc-{uuid.uuid4().hex[:6]}"
    crds_dir, samples_dir = write_manifests(
        tmp_path, [crd(GADGET)],
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, gadget("g1", ns), gadget("g2")])
    queue = f"test-rc-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {
        **os.environ,
        "KUBECONFIG": running_kubesim.kubeconfig,
        "DATABASE_URL": workers.test_database_url(),
        "OPSCONSOLE_RECONCILERS": "tests.reconcilers.engine.controller.kinds.GadgetReconciler",
        "OPSCONSOLE_BUILTIN_KINDS": "0",
        "OPSCONSOLE_CELERY_QUEUE": queue,
        "PYTHONUNBUFFERED": "1",
        "OPSCONSOLE_CONTROLLER_METRICS_PORT": str(port),
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runcontroller", "--bootstrap", "--identity", "rc-test",
         "--crds", str(crds_dir), "--samples", str(samples_dir), "--retry-period", "0.2"],
        cwd=workers.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for(lambda: (kube.get_object(api, LEASE, "default", LEASE_NAME) or {}).get("spec", {})
                 .get("holderIdentity") == "rc-test", timeout=20)
        assert kube.get_object(api, GADGET, ns, "g1") is not None
        assert kube.get_object(api, GADGET, "default", "g2") is not None  # no namespace: default
        # leading: its informers mirror the gadgets and queue their keys
        wait_for(lambda: Resource.objects.filter(kind="Gadget", deleted=False, name__in=["g1", "g2"]).count() == 2,
                 timeout=10)
        wait_for(lambda: redis_client.llen(queue) >= 2, timeout=10)
        # its /healthz names every supervised thread, all up (issue 37)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            health = json.loads(answer.read())
        assert answer.status == 200 and health["status"] == "ok", health
        assert {"controller-archive", "controller-healing", f"informer-{GADGET.plural}.{GADGET.group}"} <= set(
            health["threads"]), health

        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "bootstrap: 4 created" in out
    frozen = re.search(r"runcontroller: gc: (\d+) start-up objects frozen", out)
    assert frozen is not None and int(frozen.group(1)) > 10000, out  # Django, the client, Celery: well above
    assert kube.get_object(api, LEASE, "default", LEASE_NAME)["spec"]["holderIdentity"] == ""
    kube.delete_object(api, CRD, None, f"{GADGET.plural}.{GADGET.group}")
    kube.delete_object(api, NAMESPACE, None, ns)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
