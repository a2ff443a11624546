"""The admission webhooks end to end: kubesim's admission chain calls `runwebhooks`' server over TLS (its CA in the
generated configurations); an invalid Memcached is refused at create and at update naming the field, and is not
stored; the kind's hooks refuse a cross-field or changed value and stamp a default; a dry run is admitted and
recorded as one; every decision is on the chained action record with the Kubernetes user, and the chain verifies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubesim.testing import KubesimHandle, running_kubesim, wait_for
from opsconsole.testing.cluster import CrdInstaller
from opsconsole.webhooks.server import WebhookServer
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import audit, kube, registry
from reconcilers.engine.webhook_config import webhook_configurations
from reconcilers.kinds.memcached import MEMCACHED, MemcachedReconciler
from reconcilers.models import ActionRecord
from tests.reconcilers.testkinds import AdmittedMemcachedReconciler
from tests.support.webhooks_mtls import Mtls, mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

KIND = "tests.reconcilers.testkinds.AdmittedMemcachedReconciler"
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
MUTATING = ResourceKind("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                        "MutatingWebhookConfiguration", namespaced=False)
VALIDATING = ResourceKind("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                          "ValidatingWebhookConfiguration", namespaced=False)


@pytest.fixture(scope="module")
def webhooks(tmp_path_factory) -> Iterator[tuple[WebhookServer, bytes, Mtls]]:
    server, files = mtls_server(tmp_path_factory.mktemp("webhooks"))
    yield server, files.serving.ca_pem(), files
    server.stop()


@pytest.fixture(scope="module")
def cluster(webhooks) -> Iterator[tuple[KubesimHandle, Any]]:
    """A kubesim of this module's own (its webhooks must not reach the session's other tests), the Memcached
    CRD, and the configurations `manage.py webhooks --url ... --ca-bundle ...` prints."""
    server, ca, files = webhooks
    with running_kubesim(controllers=False, tls=True, **files.kubesim_options()) as sim:  # kubectl: TLS only
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        for doc in webhook_configurations([AdmittedMemcachedReconciler()], url=server.url(), ca_bundle=ca):
            kube.create_object(api, MUTATING if doc["kind"].startswith("Mutating") else VALIDATING, doc)
        yield sim, api
        api.close()


@pytest.fixture
def api(cluster, settings) -> Any:
    settings.OPSCONSOLE_RECONCILERS = [KIND]
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    registry.reset()
    yield cluster[1]
    registry.reset()


@pytest.fixture
def ns(api) -> str:
    name = f"w-{uuid.uuid4().hex[:8]}"
    kube.create_object(api, NAMESPACE, {"metadata": {"name": name}})
    return name


def memcached(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def refused(call: Any) -> tuple[int, str]:
    with pytest.raises(kube.ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body)["message"]


def records(webhook: str, target: str) -> list[ActionRecord]:
    return list(ActionRecord.objects.filter(action=f"admission.{webhook}", target=target).order_by("seq"))


def test_an_invalid_memcached_is_refused_at_create_and_update_naming_the_field(api, ns, webhooks):
    # an image reference the CRD's schema cannot judge (the model's validator can): refused before it is stored
    status, message = refused(lambda: kube.create_object(api, MEMCACHED, memcached(ns, "bad", size=1,
                                                                                   image="Memcached:Latest")))
    assert status == 422
    assert message.startswith('admission webhook "validate.memcacheds.cache.example.com" denied the request: '
                              "spec.image: ")
    assert kube.get_object(api, MEMCACHED, ns, "bad") is None  # not stored: nothing reaches the engine
    made = kube.create_object(api, MEMCACHED, memcached(ns, "good", size=1, port=11211))
    assert made["metadata"]["annotations"]["test.opsconsole.io/requested-by"] == "kubesim-admin"  # mutated
    status, message = refused(lambda: kube.patch_object(api, MEMCACHED, ns, "good", {"spec": {"port": 2000}}))
    assert status == 422 and message.endswith("spec.port: may not change once set (was 11211)")
    status, message = refused(lambda: kube.patch_object(api, MEMCACHED, ns, "good", {"spec": {"image": "a b"}}))
    assert status == 422 and "denied the request: spec.image: " in message
    assert kube.get_object(api, MEMCACHED, ns, "good")["spec"]["port"] == 11211
    status, message = refused(lambda: kube.create_object(api, MEMCACHED, memcached(ns, "boom", size=1,
                                                                                   image="memcached:explode")))
    assert status == 500 and "the Memcached kind's validate hook failed: RuntimeError: the hook exploded" in message

    wait_for(lambda: records("validate", MEMCACHED.request(ns, "boom").key()), timeout=10)
    refusal = records("validate", MEMCACHED.request(ns, "bad").key())[0]
    assert (refusal.actor, refusal.auth, refusal.method, refusal.outcome, refusal.status_code) == (
        "kubesim-admin", "kubernetes", "CREATE", "rejected", 422)
    assert refusal.reason.startswith("spec.image: ") and "system:masters" in refusal.detail["groups"]
    assert refusal.detail["dryRun"] is False and refusal.detail["allowed"] is False
    updates = [r for r in records("validate", MEMCACHED.request(ns, "good").key()) if r.method == "UPDATE"]
    assert [r.outcome for r in updates] == ["rejected", "rejected"]
    mutation = records("mutate", MEMCACHED.request(ns, "good").key())[0]
    assert mutation.detail["patch"] == [{"op": "add", "path": "/metadata/annotations",
                                         "value": {"test.opsconsole.io/requested-by": "kubesim-admin"}}]
    boom = records("validate", MEMCACHED.request(ns, "boom").key())[0]
    assert boom.outcome == "failed" and boom.detail["hookError"] == "RuntimeError: the hook exploded"
    assert audit.actions_verify() == []  # the decisions are links of the action record's chain
    # the API serves them (admins), filtered as any action
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    admin = get_user_model().objects.create_superuser("root", password="x" * 16)
    client = APIClient()
    client.force_authenticate(admin)
    served = client.get("/api/v1/actions", {"action": "admission.validate", "outcome": "rejected"}).json()
    rows = served["results"] if isinstance(served, dict) else served
    assert {r["target"] for r in rows} >= {MEMCACHED.request(ns, "bad").key(), MEMCACHED.request(ns, "good").key()}


def test_a_server_side_dry_run_is_admitted_and_recorded_as_a_dry_run(api, ns):
    kube.request_json(api, "POST", kube.collection_path(MEMCACHED, ns), query={"dryRun": "All"},
                      body=memcached(ns, "trial", size=2))
    assert kube.get_object(api, MEMCACHED, ns, "trial") is None
    wait_for(lambda: records("validate", MEMCACHED.request(ns, "trial").key()), timeout=10)
    decision = records("validate", MEMCACHED.request(ns, "trial").key())[0]
    assert decision.detail["dryRun"] is True and decision.outcome == "allowed"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_apply_dry_run_server_goes_through_the_webhook_and_is_on_record_as_a_dry_run(cluster, api, ns,
                                                                                           tmp_path):
    sim = cluster[0]
    env = {**os.environ, "KUBECONFIG": sim.kubeconfig, "HOME": str(tmp_path)}

    def apply(obj: dict[str, Any]) -> subprocess.CompletedProcess:
        path = tmp_path / f"{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj))
        return subprocess.run(["kubectl", "apply", "--dry-run=server", "-f", str(path)], env=env,
                              capture_output=True, text=True, timeout=60)

    good = apply(memcached(ns, "kubectl-trial", size=2))
    assert good.returncode == 0, good.stderr
    assert "memcached.cache.example.com/kubectl-trial created (server dry run)" in good.stdout
    bad = apply(memcached(ns, "kubectl-bad", size=2, image="Not A Reference"))
    assert bad.returncode != 0
    assert "denied the request" in bad.stderr and "spec.image" in bad.stderr
    for name in ("kubectl-trial", "kubectl-bad"):
        assert kube.get_object(api, MEMCACHED, ns, name) is None
        key = MEMCACHED.request(ns, name).key()
        wait_for(lambda key=key: records("validate", key), timeout=10)
        seen = records("validate", key) + records("mutate", key)
        assert seen and all(r.detail["dryRun"] is True for r in seen)  # not one record marked non-dry-run
        assert all(r.actor == "kubesim-admin" for r in seen)
    assert records("validate", MEMCACHED.request(ns, "kubectl-bad").key())[0].outcome == "rejected"


def test_the_server_counts_its_requests_as_controller_runtime_does(api, ns, webhooks):
    server, ca, files = webhooks
    kube.create_object(api, MEMCACHED, memcached(ns, "counted", size=1))
    context = files.client_context()
    for junk in ("/validate/nope.example.com/things", "/explode/cache.example.com/memcacheds"):
        probe = urllib.request.Request(f"{server.url()}{junk}", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(probe, context=context, timeout=10)
        assert info.value.code == 404
    with urllib.request.urlopen(f"{server.metrics_url()}/metrics", timeout=10) as resp:  # plain HTTP, no cert
        page = resp.read().decode()
    assert 'controller_runtime_webhook_requests_total{code="404",webhook="unknown"} 2.0' in page
    assert "nope.example.com" not in page and "explode" not in page  # a caller cannot grow the label set
    assert 'controller_runtime_webhook_requests_total{code="200",webhook="/validate/cache.example.com/memcacheds"}' \
        in page
    assert "controller_runtime_webhook_latency_seconds_bucket" in page


def test_a_decision_handed_over_twice_is_written_once():
    from opsconsole.webhooks.recorder import DecisionRecorder, decision_record
    from reconcilers.engine.admission import review_validate

    review = {"request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "n", "name": "twice",
                          "userInfo": {"username": "bob"}, "object": {"spec": {"size": 1}}}}
    decision = review_validate(AdmittedMemcachedReconciler(), review)
    assert decision_record(decision, "/validate/cache.example.com/memcacheds") is not None
    assert decision_record(decision, "/validate/cache.example.com/memcacheds") is None
    recorder = DecisionRecorder().start()
    recorder.put(decision, "/validate/cache.example.com/memcacheds")
    recorder.stop()
    assert ActionRecord.objects.filter(action="admission.validate", detail__uid=decision.uid).count() == 1
