"""The Kubernetes user the API server authenticated is the actor, end to end and with nothing written by hand:
kubesim (with a static token for a user of its own, `dana`) calls the webhook server over mutual TLS for every
write of the Gadget kind, status and DELETE included; a real engine (controller and workers) reconciles. dana
forges a status phase under the engine's own field-manager name, changes the spec and deletes the object: the
record names `kube:dana` each time (never `controller`, never the field manager), and each admission decision on
record carries the caller's address and certificate name."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import override_settings

from kubesim.testing import running_kubesim, wait_for
from opsconsole.testing.cluster import CrdInstaller
from reconcilers.core import actors
from reconcilers.core.meta import FIELD_MANAGER
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import dispatch, kube, registry
from reconcilers.engine.webhook_config import webhook_configurations
from reconcilers.models import ActionRecord, Anomaly, AnomalyCategory, Resource, SpecRevision, Transition
from tests.fixtures.cluster import POD_DELAYS
from tests.fixtures.engines import INTEGRATION_RECONCILERS, engine_running, wait_idle
from tests.reconcilers import testkinds
from tests.reconcilers.test_integration_audit_completeness import patch_as
from tests.reconcilers.testkinds import GADGET, gadget
from tests.support.webhooks_mtls import mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MUTATING, VALIDATING = (ResourceKind("admissionregistration.k8s.io", "v1", plural, kind, namespaced=False)
                        for plural, kind in (("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
                                             ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration")))
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
DANA_TOKEN = "dana-token-0123456789"


def client_as(kubeconfig: str, token: str, directory: Path) -> Any:
    """An ApiClient on the same kubesim with another user's bearer token."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    config["users"][0]["user"] = {"token": token}
    path = directory / "dana.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return kube.build_api_client(str(path))


@pytest.fixture(scope="module")
def admitted(tmp_path_factory, django_db_setup, django_db_blocker, redis_client) -> Iterator[dict[str, Any]]:
    """The webhook server (mutual TLS, in this process), a kubesim of this module's own that calls it for every
    Gadget write, the engine on that kubesim, and ApiClients as the admin (the engine's user) and as dana."""
    directory = tmp_path_factory.mktemp("admission-actors")
    tokens = directory / "tokens.csv"
    tokens.write_text(f'{DANA_TOKEN},dana,u-dana,"devs"\n')
    with override_settings(OPSCONSOLE_RECONCILERS=INTEGRATION_RECONCILERS):
        registry.reset()
        server, files = mtls_server(directory / "certs")
        try:
            with running_kubesim(mode="process", token_auth_file=str(tokens), **POD_DELAYS,
                                 **files.kubesim_options()) as sim:
                api = kube.build_api_client(sim.kubeconfig)
                CrdInstaller(api).ensure([testkinds.GadgetReconciler])
                for doc in webhook_configurations([testkinds.GadgetReconciler()], url=server.url(),
                                                  ca_bundle=files.serving.ca_pem()):
                    kube.create_object(api, MUTATING if doc["kind"].startswith("Mutating") else VALIDATING, doc)
                dana = client_as(sim.kubeconfig, DANA_TOKEN, directory)
                with engine_running(sim, django_db_blocker, prefix="test-admission-actors", extra_env={}) as engine:
                    yield {"api": api, "dana": dana, "engine": engine}
                dana.close()
                api.close()
        finally:
            server.stop()
            registry.reset()


@pytest.fixture
def scene(admitted, transactional_db, settings) -> Iterator[dict[str, Any]]:
    """A fresh namespace on the module's kubesim, the engine's queue as this process's; idle afterwards."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    settings.OPSCONSOLE_WORKQUEUE_NAME = admitted["engine"].queue_name
    ns = f"adm-{uuid.uuid4().hex[:8]}"
    kube.create_object(admitted["api"], NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": ns}})
    yield {**admitted, "ns": ns}
    wait_idle(dispatch.get_queue(), timeout=60)


def running_gadget(scene: dict[str, Any], name: str) -> tuple[str, str]:
    obj = kube.create_object(scene["api"], GADGET, gadget(scene["ns"], name, mode="ok"))
    uid = obj["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    wait_idle(dispatch.get_queue())
    return GADGET.request(scene["ns"], name).key(), uid


def test_a_status_forged_under_the_engines_name_by_an_authenticated_user_names_that_user(scene):
    key, uid = running_gadget(scene, "forged")
    patch_as(scene["dana"], FIELD_MANAGER, scene["ns"], "forged", {"status": {"phase": "Failed"}}, "status")
    dispatch.enqueue(key)  # a status-only write enqueues nothing
    anomaly = wait_for(lambda: Anomaly.objects.filter(resource__uid=uid, category=AnomalyCategory.OUT_OF_BAND)
                       .first(), timeout=30, interval=0.1)
    assert anomaly.actor == "kube:dana" and actors.established(anomaly.actor) == "admission"
    assert anomaly.observed["manager"] == FIELD_MANAGER  # the name it sent, kept as what it is: a claim
    assert "Failed" not in Transition.objects.filter(resource_uid=uid).values_list("to_phase", flat=True)
    decision = ActionRecord.objects.filter(action="admission.validate", actor="dana",
                                           target=GADGET.request(scene["ns"], "forged").key()).latest("seq")
    assert decision.remote_addr == "127.0.0.1"
    assert decision.detail["peer"]["address"] == "127.0.0.1" and decision.detail["peer"]["cn"]


def test_a_spec_change_and_a_deletion_by_an_authenticated_user_name_that_user(scene):
    key, uid = running_gadget(scene, "changed")
    patch_as(scene["dana"], "kubectl-edit", scene["ns"], "changed", {"spec": {"n": 5}})
    revision = wait_for(lambda: SpecRevision.objects.filter(resource_uid=uid, generation=2).first(), timeout=30,
                        interval=0.1)
    assert revision.actor == "kube:dana"
    kube.request_json(scene["dana"], "DELETE", kube.object_path(GADGET, scene["ns"], "changed"))
    wait_for(lambda: Resource.objects.filter(uid=uid, deleted=True).exists(), timeout=30, interval=0.1)
    deletion = Transition.objects.filter(resource_uid=uid).exclude(actor="controller").values_list("actor",
                                                                                                  flat=True)
    assert set(deletion) == {"kube:dana"}, list(Transition.objects.filter(resource_uid=uid)
                                                 .values_list("from_phase", "to_phase", "actor"))
