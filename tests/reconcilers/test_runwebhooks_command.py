"""`manage.py runwebhooks --install`, as `make run` runs it: a real process that makes its certificates, listens,
writes the webhook configurations (its URL, its CA, failurePolicy Ignore) into the cluster, so kubesim refuses an
invalid Memcached through it; on SIGTERM it deletes them and exits, its decisions written."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kubesim.testing import running_kubesim, wait_for
from opsconsole.accounts.models import ActionRecord
from opsconsole.testing.cluster import CrdInstaller
from opsconsole.webhooks.install import KINDS
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.kinds.memcached import MEMCACHED, MemcachedReconciler
from tests.support import workers

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)


def test_the_sandbox_server_installs_its_configurations_refuses_through_them_and_removes_them(tmp_path):
    with running_kubesim(controllers=False) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        ns = f"s-{uuid.uuid4().hex[:8]}"
        kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
        env = {**os.environ, "KUBECONFIG": sim.kubeconfig, "DATABASE_URL": workers.test_database_url(),
               "OPSCONSOLE_DATA_DIR": str(tmp_path), "OPSCONSOLE_TRACING": "off"}
        proc = subprocess.Popen([sys.executable, "manage.py", "runwebhooks", "--port", "0", "--install"], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            lines: list[str] = []
            deadline = time.monotonic() + 60
            while not any("installed" in line for line in lines):
                assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
                lines.append(proc.stdout.readline())
            validating = kube.get_object(api, KINDS["ValidatingWebhookConfiguration"], None, "opsconsole")
            hook = validating["webhooks"][0]
            assert hook["failurePolicy"] == "Ignore" and hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
            ca = (tmp_path / "webhooks" / "webhook-ca.pem").read_bytes()
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
            with pytest.raises(kube.ApiException) as info:
                kube.create_object(api, MEMCACHED, {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                                                    "metadata": {"name": "bad", "namespace": ns},
                                                    "spec": {"size": 1, "image": "Memcached:Latest"}})
            assert info.value.status == 422
            assert "denied the request: spec.image" in json.loads(info.value.body)["message"]
            skipped = kube.create_object(api, MEMCACHED, {  # the invalid sample's label lets it through
                "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": "sample", "namespace": ns, "labels": {"opsconsole.io/admission": "skip"}},
                "spec": {"size": 1, "image": "Memcached:Latest"}})
            assert skipped["metadata"]["name"] == "sample"
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        for kind in KINDS.values():
            assert kube.get_object(api, kind, None, "opsconsole") is None
        wait_for(lambda: ActionRecord.objects.filter(action="admission.validate",
                                                     target=f"Memcached {ns}/bad").exists(), timeout=10)
        api.close()
