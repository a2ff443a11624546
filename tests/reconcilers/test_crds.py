"""The CRDs of deploy/crds and the samples of deploy/samples, against a real kubesim: served with a status
subresource, validated and defaulted by their schemas, printed with Phase/Ready/Age; the samples apply."""

from __future__ import annotations

import json

import pytest

from kubesim.testing import running_kubesim
from reconcilers.engine import kube
from reconcilers.engine.controller.bootstrap import (
    CRD,
    BootstrapReport,
    apply_objects,
    load_manifests,
    wait_for_crds,
    yaml_files,
)
from reconcilers.kinds.memcached import MEMCACHED
from reconcilers.kinds.tenant import TENANT
from tests.fixtures.cluster import CRDS_DIR, SAMPLES_DIR
from tests.support.status_patch import patch_status

pytestmark = pytest.mark.integration

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def memcached(namespace, name, **spec):
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def rejected(call) -> list[str]:
    with pytest.raises(kube.ApiException) as info:
        call()
    assert info.value.status == 422
    return [c["field"] for c in json.loads(info.value.body)["details"]["causes"]]


def test_both_crds_define_a_status_subresource_and_the_printer_columns():
    for crd in load_manifests(yaml_files(CRDS_DIR)):
        for version in crd["spec"]["versions"]:  # Memcached serves v1alpha1 (storage) and v1beta1
            assert version["subresources"] == {"status": {}}
            names = [c["name"] for c in version["additionalPrinterColumns"]]
            assert names[0] == "Phase" and "Ready" in names and names[-1] == "Age"
            assert version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
        assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == [
            "v1alpha1" if crd["spec"]["names"]["kind"] == "Memcached" else crd["spec"]["versions"][0]["name"]]


def test_the_memcached_schema_defaults_and_validates(kapi, namespace):
    obj = kube.create_object(kapi, MEMCACHED, memcached(namespace, "m", size=2, unknown="pruned"))
    assert obj["spec"] == {"size": 2, "image": "memcached:1.6.26-alpine", "port": 11211,
                           "progressDeadlineSeconds": 600}
    assert "spec.size" in rejected(lambda: kube.create_object(kapi, MEMCACHED, memcached(namespace, "b", size=-1)))
    assert "spec.port" in rejected(lambda: kube.create_object(kapi, MEMCACHED, memcached(namespace, "c", size=1,
                                                                                          port=70000)))
    assert "spec.size" in rejected(lambda: kube.create_object(kapi, MEMCACHED, memcached(namespace, "d")))


def test_the_status_is_written_only_through_the_subresource(kapi, namespace):
    obj = kube.create_object(kapi, MEMCACHED, memcached(namespace, "m", size=1))
    obj["status"] = {"phase": "Running"}
    assert "status" not in (kube.replace_object(kapi, MEMCACHED, obj).get("status") or {})
    written = patch_status(kapi, MEMCACHED, namespace, "m", {"status": {"phase": "Running", "readyReplicas": 1}})
    assert written["status"]["phase"] == "Running"
    assert "status.phase" in rejected(lambda: patch_status(kapi, MEMCACHED, namespace, "m",
                                                                {"status": {"phase": "Sleeping"}}))


def test_kubectl_get_shows_phase_ready_and_age(kapi, namespace):
    kube.create_object(kapi, MEMCACHED, memcached(namespace, "m", size=3))
    patch_status(kapi, MEMCACHED, namespace, "m", {"status": {"phase": "Pending", "readyReplicas": 1}})
    table = _table(kapi, kube.collection_path(MEMCACHED, namespace))
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns[:3] == ["Name", "Phase", "Ready"] and "Age" in columns
    (row,) = table["rows"]
    assert row["cells"][:3] == ["m", "Pending", 1]


def _table(api, path):
    resp = api.call_api(path, "GET", header_params={"Accept": TABLE}, auth_settings=["BearerToken"],
                        _preload_content=False)
    return json.loads(resp.data)


def test_the_tenant_is_cluster_scoped_and_takes_quantities_as_strings_or_integers(kapi):
    obj = kube.create_object(kapi, TENANT, {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant",
                                            "metadata": {"name": "schema-check"},
                                            "spec": {"admins": ["a"], "quota": {"cpu": "2", "pods": 10}}})
    assert "namespace" not in obj["metadata"]
    assert obj["spec"]["quota"] == {"cpu": "2", "pods": 10}
    bad = {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": "bad-ns"},
           "spec": {"namespace": "Not_A_Namespace"}}
    assert "spec.namespace" in rejected(lambda: kube.create_object(kapi, TENANT, bad))
    kube.delete_object(kapi, TENANT, None, "schema-check")


def test_the_samples_apply_to_a_fresh_cluster_and_include_the_ones_made_to_fail():
    samples = load_manifests(yaml_files(SAMPLES_DIR))
    images = [s["spec"].get("image", "") for s in samples if s["kind"] == "Memcached"]
    assert any("broken" in image for image in images)  # kubesim's kubelet cannot pull it
    assert any(s["kind"] == "Tenant" and s["spec"].get("quota", {}).get("cpu") == "lots" for s in samples)
    with running_kubesim(controllers=False) as k:
        api = kube.build_api_client(k.kubeconfig)
        crds = load_manifests(yaml_files(CRDS_DIR))
        for crd in crds:
            kube.ensure_object(api, CRD, crd)
        wait_for_crds(api, crds, timeout=10)
        report = BootstrapReport()
        apply_objects(api, samples, report)
        assert len(report.created) == len(samples)
        api.close()
