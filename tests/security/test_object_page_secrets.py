"""The generic object page as a namespace-limited operator would probe it once a registered kind owns Secrets
(the test kind Keyring, tests/security/keyring.py), with the Kubernetes API faked: the Keyring's own Secret is
shown as `kubectl describe` shows it (its keys and sizes, no value, no last-applied annotation); a Secret no
registered resource owns, in the same namespace, is a 404, as is a Pod no resource owns and a Secret owned by a
Keyring outside the user's namespaces (owner chain through another namespace's resource)."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from reconcilers.engine import apiclient, kube
from reconcilers.services.selectors import health_tree as ht
from tests.opsconsole.api import factories as f
from tests.security import keyring

KEYRING_KIND = {"group": keyring.KEYRING.group, "version": keyring.KEYRING.version, "plural": keyring.KEYRING.plural,
                "kind": keyring.KEYRING.kind}
PASSWORD = "hunter2-" + uuid.uuid4().hex
STRAY = "stray-" + uuid.uuid4().hex


def _secret(name: str, namespace: str, value: str, owner_uid: str = "") -> dict:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-{name}-{namespace}",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                {"stringData": {"password": value}})}}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "test.opsconsole.io/v1", "kind": "Keyring", "name": "vault",
                                    "uid": owner_uid, "controller": True}]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
            "data": {"password": base64.b64encode(value.encode()).decode()}, "stringData": {"note": value}}


class FakeCluster:
    """kube.get_object / list_objects over Secrets and a Pod in two namespaces."""

    def __init__(self, owner_in: str, owner_out: str) -> None:
        self.objects = {
            "secrets": [_secret("vault-credentials", "team-a", PASSWORD, owner_in),
                        _secret("db-root", "team-a", STRAY),
                        _secret("vault-credentials", "team-b", STRAY, owner_out)],
            "pods": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "loose", "namespace": "team-a",
                                                                       "uid": "p-loose"}, "spec": {}}],
        }

    def get(self, api, kind, namespace, name, **kwargs):
        found = [o for o in self.objects.get(kind.plural, [])
                 if o["metadata"]["name"] == name and o["metadata"]["namespace"] == (namespace or "")]
        return json.loads(json.dumps(found[0])) if found else None

    def list(self, api, kind, namespace=None, **kwargs):
        return kube.ListResult([], "1")


@pytest.fixture
def cluster(monkeypatch, reconcilers, db):
    reconcilers(["tests.security.keyring.KeyringReconciler"])
    ht.cache_clear()
    inside = f.resource("vault", "team-a", kind=KEYRING_KIND)
    outside = f.resource("vault", "team-b", kind=KEYRING_KIND)
    fake = FakeCluster(inside.uid, outside.uid)
    monkeypatch.setattr(kube, "get_object", fake.get)
    monkeypatch.setattr(kube, "list_objects", fake.list)
    monkeypatch.setattr(apiclient, "get_api_client", lambda: object())
    yield inside
    ht.cache_clear()


def _leaks(body: str) -> list[str]:
    forms = [PASSWORD, STRAY, base64.b64encode(PASSWORD.encode()).decode(), base64.b64encode(STRAY.encode()).decode()]
    return [v for v in forms if v in body]


def test_an_owned_secret_shows_its_keys_and_sizes_and_no_value(as_role, cluster):
    response = as_role("operator", ["team-a"]).get("/objects/core/v1/secrets/team-a/vault-credentials/")
    body = response.content.decode()
    assert response.status_code == 200, body[:500]
    assert _leaks(body) == []
    assert f"password: &lt;{len(PASSWORD)} bytes&gt;" in body or f"password: <{len(PASSWORD)} bytes>" in body
    assert f'href="/resources/{cluster.pk}/"' in body  # its owner chain ends at the Keyring


@pytest.mark.parametrize("path", [
    "/objects/core/v1/secrets/team-a/db-root/",  # no registered resource owns it
    "/objects/core/v1/pods/team-a/loose/",  # an object no registered resource owns
    "/objects/core/v1/secrets/team-b/vault-credentials/",  # another namespace
])
def test_an_unowned_or_foreign_object_is_a_404_without_its_data(as_role, cluster, path):
    response = as_role("operator", ["team-a"]).get(path)
    assert response.status_code == 404 and _leaks(response.content.decode()) == []


def test_even_an_unlimited_admin_never_sees_a_secrets_values(as_role, cluster):
    admin = as_role("admin")
    assert admin.get("/objects/core/v1/secrets/team-a/db-root/").status_code == 404
    owned = admin.get("/objects/core/v1/secrets/team-b/vault-credentials/")
    assert owned.status_code == 200 and _leaks(owned.content.decode()) == []
