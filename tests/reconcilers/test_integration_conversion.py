"""A kind with two versions end to end: its generated CRD on kubesim converts by webhook through `runwebhooks`'
server (the sandbox install writes the URL and the CA into the CRD); an object written as v2 is stored as v1,
read back in either version, and an object that cannot be converted fails the request with the kind's error.
The built-in Memcached's v1beta1: an old (v1alpha1) object read as v1beta1 and written back, stored in v1alpha1
as the reconciler reads it, and a v1beta1 create validated against v1beta1's model."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubesim.testing import running_kubesim
from opsconsole.testing.cluster import CrdInstaller
from opsconsole.testing.reconcile import Reconciling
from opsconsole.webhooks.install import CRD, install
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, registry
from reconcilers.kinds.memcached import DEFAULT_IMAGE, DEFAULT_PORT, MEMCACHED, MemcachedReconciler
from tests.reconcilers.testkinds import SPROCKET, SprocketReconciler
from tests.support.webhooks_mtls import mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
SPROCKET_V2 = ResourceKind(SPROCKET.group, "v2", SPROCKET.plural, SPROCKET.kind, namespaced=True)
MEMCACHED_V1BETA1 = ResourceKind(MEMCACHED.group, "v1beta1", MEMCACHED.plural, MEMCACHED.kind, namespaced=True)


@contextlib.contextmanager
def wired(tmp_path: Any, kind: type, crd_name: str) -> Iterator[Any]:
    """kubesim with `kind`'s CRD whose conversion and admission go to a webhook server over TLS, wired as
    `runwebhooks --install` wires them (a second look writes nothing); the API client."""
    server, files = mtls_server(tmp_path)  # mutual TLS, as runwebhooks serves: kubesim presents the certificate
    try:
        with running_kubesim(controllers=False, **files.kubesim_options()) as sim:
            api = kube.build_api_client(sim.kubeconfig)
            CrdInstaller(api).ensure([kind])
            ca = files.serving.ca_pem()
            assert f"CustomResourceDefinition {crd_name}" in install(api, server.url(), ca)
            assert install(api, server.url(), ca) == []
            yield api
            api.close()
    finally:
        server.stop()
        registry.reset()


@pytest.fixture
def cluster(tmp_path, settings) -> Iterator[Any]:
    settings.OPSCONSOLE_RECONCILERS = ["tests.reconcilers.testkinds.SprocketReconciler"]
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    registry.reset()
    with wired(tmp_path, SprocketReconciler, "sprockets.test.opsconsole.io") as api:
        yield api


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


@pytest.fixture
def memcached_cluster(tmp_path, settings) -> Iterator[Any]:
    """The built-in kinds (Memcached with v1beta1), wired to a webhook server."""
    settings.OPSCONSOLE_RECONCILERS = []
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    registry.reset()
    with wired(tmp_path, MemcachedReconciler, "memcacheds.cache.example.com") as api:
        yield api


def test_an_old_memcached_is_read_as_v1beta1_written_back_and_keeps_working(memcached_cluster):
    api = memcached_cluster
    ns = f"m-{uuid.uuid4().hex[:8]}"
    kube.create_object(api, NAMESPACE, {"metadata": {"name": ns}})
    kube.create_object(api, MEMCACHED, {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                                        "metadata": {"name": "old", "namespace": ns}, "spec": {"size": 2}})
    beta = kube.get_object(api, MEMCACHED_V1BETA1, ns, "old")
    assert beta["apiVersion"] == "cache.example.com/v1beta1"
    assert beta["spec"] == {"replicas": 2, "container": {"image": DEFAULT_IMAGE, "port": DEFAULT_PORT},
                            "progressDeadlineSeconds": 600}
    beta["spec"]["replicas"] = 4
    beta["spec"]["container"]["port"] = 11311
    written = kube.replace_object(api, MEMCACHED_V1BETA1, beta)  # written back in v1beta1 (a PUT)
    assert written["spec"]["replicas"] == 4 and written["metadata"]["generation"] == 2
    stored = kube.get_object(api, MEMCACHED, ns, "old")
    assert stored["apiVersion"] == "cache.example.com/v1alpha1"
    assert stored["spec"] == {"size": 4, "image": DEFAULT_IMAGE, "port": 11311, "progressDeadlineSeconds": 600}
    outcome = Reconciling(api, [MemcachedReconciler], lambda: ns).once(stored)  # the real step, as always
    (deployment,) = [c for c in outcome.children if c["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 4
    assert deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 11311
    assert outcome.phase == "Pending" and not outcome.error_class

    with pytest.raises(kube.ApiException) as info:  # v1beta1's own model at admission, its field named
        kube.create_object(api, MEMCACHED_V1BETA1, {"apiVersion": "cache.example.com/v1beta1", "kind": "Memcached",
                                                    "metadata": {"name": "big", "namespace": ns},
                                                    "spec": {"replicas": 1, "container": {"image": "Bad:Image"}}})
    assert info.value.status == 422 and "spec.container.image" in json.loads(info.value.body)["message"]
    assert kube.get_object(api, MEMCACHED, ns, "big") is None
