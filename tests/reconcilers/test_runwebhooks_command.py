"""`manage.py runwebhooks --install`, as `make run` runs it: a real process that makes its certificates, listens,
writes the webhook configurations (its URL, its CA, failurePolicy Ignore) into the cluster, so kubesim refuses an
invalid Memcached through it; on SIGTERM it deletes them and exits, its decisions written. It points Memcached's
conversion at itself (a v1beta1 read goes through it) and keeps that wiring while the controller re-applies the
CRDs and configurations go missing; and a decision it answered just before a SIGKILL, while the database held its
write back, is written by the next server. `manage.py webhooks --apply` writes the kinds' own policies: with the
server down, Fail refuses a create and Ignore lets it through."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction

from kubesim.testing import running_kubesim, wait_for
from opsconsole.testing.cluster import CrdInstaller
from opsconsole.webhooks.install import CRD, KINDS
from opsconsole.webhooks.recorder import DecisionRecorder
from opsconsole.webhooks.tls import ensure_certificates, ensure_client_certificates
from reconcilers.core.crd import crd_manifest
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.engine.controller.bootstrap import install_crds
from reconcilers.kinds.memcached import MEMCACHED, MemcachedReconciler
from reconcilers.models import ActionRecord
from tests.support import workers

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
MEMCACHED_V1BETA1 = ResourceKind(MEMCACHED.group, "v1beta1", MEMCACHED.plural, MEMCACHED.kind, namespaced=True)


def start_server(tmp_path: Path, kubeconfig: str, *extra: str, env: dict[str, str] | None = None,
                 data_dir: str = "data") -> subprocess.Popen:
    """`runwebhooks --install` in a process of its own, returned once it says its configurations are installed."""
    env = {**os.environ, "KUBECONFIG": kubeconfig, "DATABASE_URL": workers.test_database_url(),
           "OPSCONSOLE_DATA_DIR": str(tmp_path / data_dir), "OPSCONSOLE_TRACING": "off", **(env or {})}
    proc = subprocess.Popen([sys.executable, "manage.py", "runwebhooks", "--port", "0", "--metrics-port", "0",
                             "--install", *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while not any("installed" in line for line in lines):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError("runwebhooks did not install its configurations:\n" + "".join(lines)
                                 + (proc.stdout.read() or ""))
        lines.append(proc.stdout.readline())
    return proc


def sandbox_kubesim(tmp_path: Path, data_dir: str = "data") -> Any:
    """A kubesim presenting the client certificate `runwebhooks` makes (and trusts) in its data dir, as `make run`
    starts it."""
    client = ensure_client_certificates(tmp_path / data_dir / "webhooks")
    return running_kubesim(controllers=False, webhook_client_cert=str(client.cert),
                           webhook_client_key=str(client.key))


def stop_server(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    return out


def test_the_sandbox_server_installs_its_configurations_refuses_through_them_and_removes_them(tmp_path):
    with sandbox_kubesim(tmp_path) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        ns = f"s-{uuid.uuid4().hex[:8]}"
        kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
        proc = start_server(tmp_path, sim.kubeconfig)
        try:
            validating = kube.get_object(api, KINDS["ValidatingWebhookConfiguration"], None, "opsconsole")
            hook = validating["webhooks"][0]
            assert hook["failurePolicy"] == "Ignore" and hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
            ca = (tmp_path / "data" / "webhooks" / "webhook-ca.pem").read_bytes()
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
            stop_server(proc)
        for kind in KINDS.values():
            assert kube.get_object(api, kind, None, "opsconsole") is None
        wait_for(lambda: ActionRecord.objects.filter(action="admission.validate",
                                                     target=MEMCACHED.request(ns, "bad").key()).exists(), timeout=10)
        api.close()


def test_it_serves_memcacheds_conversion_and_keeps_its_wiring_in_place(tmp_path):
    with sandbox_kubesim(tmp_path) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        ns = f"w-{uuid.uuid4().hex[:8]}"
        kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
        proc = start_server(tmp_path, sim.kubeconfig, "--recheck-interval", "0.3")
        try:
            kube.create_object(api, MEMCACHED, {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                                                "metadata": {"name": "m", "namespace": ns}, "spec": {"size": 3}})
            assert kube.get_object(api, MEMCACHED_V1BETA1, ns, "m")["spec"]["replicas"] == 3
            # the controller applies the generated CRD again (a restart, `--install-crds`): the wiring stays
            install_crds(api, [crd_manifest(MemcachedReconciler)])
            config = kube.get_object(api, CRD, None, "memcacheds.cache.example.com")["spec"]["conversion"]["webhook"]
            assert config["clientConfig"]["url"].endswith("/convert/cache.example.com/memcacheds")
            assert kube.get_object(api, MEMCACHED_V1BETA1, ns, "m")["spec"]["replicas"] == 3
            # the conversion pointed back at the deploy/kustomize Service (as deploy/crds has it), and a configuration
            # deleted: both back within a look or two
            kube.patch_object(api, CRD, None, "memcacheds.cache.example.com", {"spec": {"conversion": {"webhook": {
                "clientConfig": {"url": None, "caBundle": None,
                                 "service": {"namespace": "opsconsole", "name": "opsconsole-webhooks"}}}}}})
            kube.delete_object(api, KINDS["ValidatingWebhookConfiguration"], None, "opsconsole")
            wait_for(lambda: kube.get_object(api, KINDS["ValidatingWebhookConfiguration"], None, "opsconsole"),
                     timeout=15)
            wait_for(lambda: (kube.get_object(api, CRD, None, "memcacheds.cache.example.com")["spec"]["conversion"]
                              ["webhook"]["clientConfig"].get("url")), timeout=15)
            assert kube.get_object(api, MEMCACHED_V1BETA1, ns, "m")["spec"]["replicas"] == 3
        finally:
            stop_server(proc)
        api.close()


def test_a_decision_answered_just_before_a_sigkill_is_written_by_the_next_server(tmp_path):
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    env = {"OPSCONSOLE_ADMISSION_QUEUE": queue, "OPSCONSOLE_ADMISSION_LEASE_SECONDS": "2"}
    keys = DecisionRecorder(queue)  # its key names only: never started
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    with sandbox_kubesim(tmp_path) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        ns = f"k-{uuid.uuid4().hex[:8]}"
        kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
        first = start_server(tmp_path, sim.kubeconfig, env=env)
        try:
            with transaction.atomic():  # the database holds the record's write back
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute(f"LOCK TABLE {ActionRecord._meta.db_table} IN EXCLUSIVE MODE")
                else:  # SQLite: any write takes the database's one write lock
                    User.objects.create(username=f"lock-{uuid.uuid4().hex[:6]}")
                with pytest.raises(kube.ApiException) as info:
                    kube.create_object(api, MEMCACHED, {"apiVersion": "cache.example.com/v1alpha1",
                                                        "kind": "Memcached", "metadata": {"name": "killed",
                                                                                          "namespace": ns},
                                                        "spec": {"size": 1, "image": "Not A Reference"}})
                assert info.value.status == 422  # answered
                wait_for(lambda: sum(client.llen(k) for k in client.scan_iter(keys.processing_prefix + "*")) == 1,
                         timeout=10)  # in the recorder's hand, its write waiting on the lock
                first.kill()
                first.wait(10)
        finally:
            if first.poll() is None:
                first.kill()
        target = MEMCACHED.request(ns, "killed").key()
        assert not ActionRecord.objects.filter(action="admission.validate", target=target).exists()
        second = start_server(tmp_path, sim.kubeconfig, env=env)
        try:
            wait_for(lambda: ActionRecord.objects.filter(action="admission.validate", target=target).exists(),
                     timeout=30)
        finally:
            stop_server(second)
        record = ActionRecord.objects.get(action="admission.validate", target=target)
        assert record.status_code == 422 and "spec.image" in record.reason
        assert sum(client.llen(k) for k in client.scan_iter(f"opsconsole:admission:{{{queue}}}:*")
                   if b":lease:" not in k) == 0
        api.close()


def test_webhooks_apply_writes_the_kinds_policies_and_a_server_that_is_down_refuses_with_fail_not_with_ignore(
        tmp_path):
    with running_kubesim(controllers=False) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        ns = f"d-{uuid.uuid4().hex[:8]}"
        kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
        files = ensure_certificates(tmp_path / "certs", ("localhost",))
        with socket.socket() as s:  # a port nobody listens on: the server is down
            s.bind(("127.0.0.1", 0))
            down = f"https://127.0.0.1:{s.getsockname()[1]}"
        env = {**os.environ, "KUBECONFIG": sim.kubeconfig, "OPSCONSOLE_DATA_DIR": str(tmp_path),
               "DATABASE_URL": workers.test_database_url()}
        applied = subprocess.run([sys.executable, "manage.py", "webhooks", "--url", down, "--ca-bundle",
                                  str(files.ca_cert), "--apply"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=60)
        assert applied.returncode == 0, applied.stderr
        assert "ValidatingWebhookConfiguration opsconsole applied" in applied.stdout
        validating = kube.get_object(api, KINDS["ValidatingWebhookConfiguration"], None, "opsconsole")
        (hook,) = [h for h in validating["webhooks"] if h["name"] == "validate.memcacheds.cache.example.com"]
        assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["url"].startswith(down)

        def create(name: str) -> dict:
            return kube.create_object(api, MEMCACHED, {"apiVersion": "cache.example.com/v1alpha1",
                                                       "kind": "Memcached", "metadata": {"name": name,
                                                                                         "namespace": ns},
                                                       "spec": {"size": 1}})

        with pytest.raises(kube.ApiException) as info:
            create("while-down")
        message = json.loads(info.value.body)["message"]
        assert info.value.status == 500 and 'failed calling webhook "validate.memcacheds.cache.example.com"' in \
            message
        assert kube.get_object(api, MEMCACHED, ns, "while-down") is None
        hook["failurePolicy"] = "Ignore"
        kube.replace_object(api, KINDS["ValidatingWebhookConfiguration"], validating)
        assert create("while-down")["metadata"]["name"] == "while-down"  # Ignore: let through, server still down
        api.close()


def test_a_server_given_its_certificate_without_a_client_ca_refuses_to_start(tmp_path):
    files = ensure_certificates(tmp_path / "certs", ("localhost",))
    env = {**os.environ, "DATABASE_URL": workers.test_database_url(), "OPSCONSOLE_DATA_DIR": str(tmp_path),
           "OPSCONSOLE_TRACING": "off"}
    done = subprocess.run([sys.executable, "manage.py", "runwebhooks", "--port", "0", "--metrics-port", "-1",
                           "--cert", str(files.cert), "--key", str(files.key)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--client-ca is required" in done.stderr
