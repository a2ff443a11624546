"""A kind with two versions end to end: its generated CRD on kubesim converts by webhook through `runwebhooks`'
server (the sandbox install writes the URL and the CA into the CRD); an object written as v2 is stored as v1,
read back in either version, and an object that cannot be converted fails the request with the kind's error."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim.testing import running_kubesim
from opsconsole.testing.cluster import CrdInstaller
from opsconsole.webhooks.install import CRD, install
from opsconsole.webhooks.server import WebhookServer, tls_context
from opsconsole.webhooks.tls import ensure_certificates
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, registry
from tests.reconcilers.testkinds import SPROCKET, SprocketReconciler

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
SPROCKET_V2 = ResourceKind(SPROCKET.group, "v2", SPROCKET.plural, SPROCKET.kind, namespaced=True)


@pytest.fixture
def cluster(tmp_path, settings) -> Iterator[Any]:
    settings.OPSCONSOLE_RECONCILERS = ["tests.reconcilers.testkinds.SprocketReconciler"]
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    registry.reset()
    files = ensure_certificates(tmp_path, ("localhost",))
    server = WebhookServer(tls_context(str(files.cert), str(files.key)))
    server.start()
    try:
        with running_kubesim(controllers=False) as sim:
            api = kube.build_api_client(sim.kubeconfig)
            CrdInstaller(api).ensure([SprocketReconciler])
            written = install(api, server.url(), files.ca_pem())
            assert "CustomResourceDefinition sprockets.test.opsconsole.io" in written
            yield api
            api.close()
    finally:
        server.stop()
        registry.reset()


def test_a_v2_object_is_stored_as_v1_and_served_in_both(cluster):
    api = cluster
    crd = kube.get_object(api, CRD, None, "sprockets.test.opsconsole.io")
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"].endswith("/convert/test.opsconsole.io/sprockets")
    ns = f"v-{uuid.uuid4().hex[:8]}"
    kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
    made = kube.create_object(api, SPROCKET_V2, {"apiVersion": "test.opsconsole.io/v2", "kind": "Sprocket",
                                                 "metadata": {"name": "new", "namespace": ns},
                                                 "spec": {"gearing": {"count": 9}}})
    assert made["apiVersion"] == "test.opsconsole.io/v2" and made["spec"] == {"gearing": {"count": 9}}
    assert kube.get_object(api, SPROCKET, ns, "new")["spec"] == {"teeth": 9}  # stored as v1
    kube.create_object(api, SPROCKET, {"apiVersion": "test.opsconsole.io/v1", "kind": "Sprocket",
                                       "metadata": {"name": "old", "namespace": ns}, "spec": {"teeth": 4}})
    old = kube.get_object(api, SPROCKET_V2, ns, "old")
    assert old["spec"] == {"gearing": {"count": 4}}  # an old object keeps working in the new version
    kube.patch_object(api, SPROCKET_V2, ns, "old", {"spec": {"gearing": {"count": 5}}})
    assert kube.get_object(api, SPROCKET, ns, "old")["spec"] == {"teeth": 5}
    listed = kube.list_objects(api, SPROCKET_V2, ns)
    items = listed.items if hasattr(listed, "items") else listed
    assert sorted(i["spec"]["gearing"]["count"] for i in items) == [5, 9]
    with pytest.raises(kube.ApiException) as info:
        kube.create_object(api, SPROCKET_V2, {"apiVersion": "test.opsconsole.io/v2", "kind": "Sprocket",
                                              "metadata": {"name": "bad", "namespace": ns},
                                              "spec": {"gearing": {"count": 1}, "explode": True}})
    body = json.loads(info.value.body)
    assert info.value.status == 500 and "this sprocket cannot be converted" in body["message"]
