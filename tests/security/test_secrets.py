"""Secret data is never shown or logged. A real engine (kubesim, two Celery workers and the controller, logging
at DEBUG, tracing on) runs the test kind `Keyring` (tests/security/keyring.py), which owns a Secret of generated
credentials, reads a Secret a user made, logs both objects and names them in its status. After it converged and
a manual reconcile went through, the values of both Secrets (plain and base64) appear on no console page (every
page, live fragment and trace view), in no API answer (every read endpoint and export), in no log line of the
workers, the controller or the web process, and in no database row; while the console does list the owned
Secret by name and the worker log does hold the redacted lines (so the search could have found them)."""

from __future__ import annotations

import base64
import logging
import secrets
import uuid
from collections.abc import Iterator

import pytest
from django.apps import apps
from django.test import Client
from rest_framework.test import APIClient

from kubesim.testing import wait_for
from opsconsole.accounts.tokens import token_create
from reconcilers.engine import dispatch, kube, registry
from reconcilers.engine.controller.bootstrap import CRD, wait_for_crds
from reconcilers.models import ReconcileRun, Resource, Span
from tests.fixtures.cluster import package_kubesim
from tests.fixtures.engines import INTEGRATION_RECONCILERS, audit_intact, engine_running, wait_idle
from tests.opsconsole.api import factories as f
from tests.security import keyring

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
RECONCILERS = [*INTEGRATION_RECONCILERS, "tests.security.keyring.KeyringReconciler"]
# a kubesim of this module's own: its engine lists and reconciles only this module's objects
kubesim = package_kubesim("module")


@pytest.fixture(scope="module")
def keyring_engine(kubesim, redis_client, django_db_setup, django_db_blocker) -> Iterator:
    """The engine with the Keyring kind registered (its CRD applied first), logging at DEBUG, tracing on."""
    api = kube.build_api_client(kubesim.kubeconfig)
    kube.ensure_object(api, CRD, keyring.CRD)
    wait_for_crds(api, [keyring.CRD], timeout=30)
    api.close()
    extra = {"OPSCONSOLE_RECONCILERS": ",".join(RECONCILERS), "LOG_LEVEL": "DEBUG", "OPSCONSOLE_TRACING": "on"}
    with engine_running(kubesim, django_db_blocker, prefix="test-secrets", extra_env=extra) as running:
        yield running


@pytest.fixture
def engine(keyring_engine, transactional_db, kapi, settings, monkeypatch) -> Iterator:
    from reconcilers.services.selectors import liveness

    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@test"], "error": ""})
    settings.OPSCONSOLE_RECONCILERS = RECONCILERS
    settings.OPSCONSOLE_WORKQUEUE_NAME = keyring_engine.queue_name
    registry.reset()
    yield keyring_engine
    wait_idle(dispatch.get_queue(), timeout=60)
    audit_intact()
    registry.reset()


def forms_of(value: str) -> list[str]:
    """A secret value as it could leak: plain, or as the Secret's base64 data."""
    return [value, base64.b64encode(value.encode()).decode()]


def test_secret_data_is_on_no_page_in_no_answer_no_log_line_and_no_row(engine, kapi, namespace, caplog):
    caplog.set_level(logging.DEBUG)
    root_password, api_key = secrets.token_urlsafe(18), secrets.token_hex(20)
    kube.create_object(kapi, keyring.SECRET, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-root", "namespace": namespace},
        "type": "Opaque", "data": {"password": base64.b64encode(root_password.encode()).decode(),
                                   "api-key": base64.b64encode(api_key.encode()).decode()},
    })
    uid = kube.create_object(kapi, keyring.KEYRING, {
        "apiVersion": "test.opsconsole.io/v1", "kind": "Keyring", "metadata": {"name": "vault", "namespace": namespace},
        "spec": {"existingSecret": "db-root"}})["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=60, interval=0.2)
    owned = kube.get_object(kapi, keyring.SECRET, namespace, "vault-credentials")
    assert owned["metadata"]["ownerReferences"][0]["uid"] == uid
    generated = base64.b64decode(owned["data"]["password"]).decode()
    values = [v for value in (root_password, api_key, generated) for v in forms_of(value)]

    admin = f.user(f"sec-admin-{uuid.uuid4().hex[:6]}", "admin")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(admin, name='secrets').secret}")
    res = Resource.objects.get(uid=uid)
    asked = api.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "rotate?"}, format="json")
    assert asked.status_code == 202
    wait_for(lambda: api.get(f"/api/v1/reconcile-requests/{asked.json()['id']}").json()["state"] == "succeeded",
             timeout=30, interval=0.2)
    trace_ids = set(ReconcileRun.objects.filter(resource=res).exclude(trace_id="").values_list("trace_id", flat=True))
    assert trace_ids
    wait_for(lambda: Span.objects.filter(trace_id__in=trace_ids).exists(), timeout=30, interval=0.3)

    def leaks(text: str) -> list[str]:
        return [v for v in values if v in text]

    console = Client()
    console.force_login(admin)
    pages = ["/", "/?_live=recent,machines", "/resources/", "/resources/?kind=Keyring", f"/resources/{res.pk}/",
             f"/resources/{res.pk}/?_live=head,machine,timeline,runs,request", "/audit/", "/audit/?view=actions",
             "/queue/", *[f"/traces/{t}/" for t in trace_ids]]
    for path in pages:
        response = console.get(path)
        assert response.status_code == 200, path
        assert not leaks(response.content.decode()), path
    detail = console.get(f"/resources/{res.pk}/").content.decode()
    assert "vault-credentials" in detail and "db-root" in detail  # the Secrets were looked at, named only

    reads = ["/api/v1/resources", f"/api/v1/resources/{res.pk}", f"/api/v1/resources/{res.pk}/transitions",
             f"/api/v1/resources/{res.pk}/reconciles", f"/api/v1/resources/{res.pk}/events", "/api/v1/transitions",
             "/api/v1/reconcile-requests", f"/api/v1/reconcile-requests/{asked.json()['id']}", "/api/v1/queue",
             "/api/v1/kinds", "/api/v1/actions", "/api/v1/metrics/summary", "/api/v1/me", "/api/v1/tokens"]
    for path in reads:
        response = api.get(path)
        assert response.status_code == 200, (path, response.content[:300])
        assert not leaks(response.content.decode()), path
    children = api.get(f"/api/v1/resources/{res.pk}").json()["live_children"]
    assert [c["name"] for c in children] == ["vault-credentials"] and set(children[0]) >= {"kind", "name"}
    for export in ("/api/v1/transitions.csv", "/api/v1/transitions.jsonl"):
        assert not leaks(b"".join(api.get(export).streaming_content).decode()), export

    worker_logs = engine.worker_logs()
    controller_log = engine.controller.log_path.read_text(errors="replace")
    assert "credentials ready for vault" in worker_logs and "[REDACTED]" in worker_logs
    assert "DEBUG" in worker_logs  # the workers did log at DEBUG
    for name, text in (("workers", worker_logs), ("controller", controller_log),
                       ("web", "\n".join(r.getMessage() for r in caplog.records))):
        assert not leaks(text), name

    rows = 0
    for model in apps.get_models():
        for row in model._base_manager.all().values():
            rows += 1
            assert not leaks(repr(row)), model.__name__
    lines = len(worker_logs.splitlines()) + len(controller_log.splitlines())
    print(f"\nSECURITY secrets: 3 Secret values (plain and base64) on none of {len(pages)} console pages and "
          f"{len(reads) + 2} API answers, in none of {lines} engine log lines (DEBUG) and {rows} database rows")
    kube.delete_object(kapi, keyring.KEYRING, namespace, "vault")
