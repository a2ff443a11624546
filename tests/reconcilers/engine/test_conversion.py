"""Conversion of a kind with several versions (reconcilers.engine.conversion): hub and spoke through the storage
version, metadata kept, a failing function or an unknown version a Failure naming the object; the generated CRD
lists the versions with their schemas and converts by webhook."""

from __future__ import annotations

from reconcilers.core.crd import crd_manifest
from reconcilers.engine.conversion import convert_object, review_convert
from reconcilers.kinds.memcached import MemcachedReconciler
from tests.reconcilers.testkinds import SprocketReconciler


def sprocket(version: str, spec: dict) -> dict:
    return {"apiVersion": f"test.opsconsole.io/{version}", "kind": "Sprocket",
            "metadata": {"name": "s", "namespace": "n", "uid": "u-1", "resourceVersion": "7"}, "spec": spec}


def test_storage_to_v2_and_back_keep_the_metadata():
    rec = SprocketReconciler()
    v2 = convert_object(rec, sprocket("v1", {"teeth": 12}), "test.opsconsole.io/v2")
    assert v2["apiVersion"] == "test.opsconsole.io/v2" and v2["spec"] == {"gearing": {"count": 12}}
    assert v2["metadata"] == {"name": "s", "namespace": "n", "uid": "u-1", "resourceVersion": "7"}
    back = convert_object(rec, v2, "test.opsconsole.io/v1")
    assert back["spec"] == {"teeth": 12} and back["apiVersion"] == "test.opsconsole.io/v1"
    same = convert_object(rec, sprocket("v1", {"teeth": 3}), "test.opsconsole.io/v1")
    assert same["spec"] == {"teeth": 3}


def test_a_review_converts_every_object_or_fails_naming_the_one_that_could_not_be():
    rec = SprocketReconciler()
    answer = review_convert(rec, {"request": {"uid": "r1", "desiredAPIVersion": "test.opsconsole.io/v2",
                                              "objects": [sprocket("v1", {"teeth": 1}), sprocket("v1", {"teeth": 2})]}})
    assert answer["uid"] == "r1" and answer["result"] == {"status": "Success"}
    assert [o["spec"]["gearing"]["count"] for o in answer["convertedObjects"]] == [1, 2]
    failed = review_convert(rec, {"request": {"uid": "r2", "desiredAPIVersion": "test.opsconsole.io/v1",
                                              "objects": [sprocket("v2", {"explode": True})]}})
    assert failed["result"]["status"] == "Failure"
    assert failed["result"]["message"] == ("Sprocket n/s from test.opsconsole.io/v2 to test.opsconsole.io/v1: "
                                           "ValueError: this sprocket cannot be converted")
    unknown = review_convert(rec, {"request": {"uid": "r3", "desiredAPIVersion": "test.opsconsole.io/v9",
                                               "objects": [sprocket("v1", {"teeth": 1})]}})
    assert "has no version 'v9'" in unknown["result"]["message"]


def test_the_crd_lists_both_versions_and_converts_by_webhook():
    crd = crd_manifest(SprocketReconciler)
    v1, v2 = crd["spec"]["versions"]
    assert (v1["name"], v1["storage"], v2["name"], v2["storage"], v2["served"]) == ("v1", True, "v2", False, True)
    assert "teeth" in v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "gearing" in v2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"] == \
        "/convert/test.opsconsole.io/sprockets"


def memcached(version: str, spec: dict) -> dict:
    return {"apiVersion": f"cache.example.com/{version}", "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "n", "uid": "u-2"}, "spec": spec}


def test_memcached_v1beta1_is_the_same_spec_in_a_new_shape_and_nothing_is_lost_either_way():
    rec = MemcachedReconciler()
    old = {"size": 3, "image": "memcached:1.6", "port": 11311, "progressDeadlineSeconds": 60}
    beta = convert_object(rec, memcached("v1alpha1", old), "cache.example.com/v1beta1")
    assert beta["spec"] == {"replicas": 3, "container": {"image": "memcached:1.6", "port": 11311},
                            "progressDeadlineSeconds": 60}
    assert convert_object(rec, beta, "cache.example.com/v1alpha1")["spec"] == old
    bare = convert_object(rec, memcached("v1beta1", {"replicas": 1}), "cache.example.com/v1alpha1")
    assert bare["spec"] == {"size": 1}  # defaults are the schema's, in whichever version the client wrote
    assert convert_object(rec, memcached("v1beta1", {"replicas": 2, "container": None}),
                          "cache.example.com/v1alpha1")["spec"] == {"size": 2}


def test_memcacheds_crd_serves_v1beta1_with_its_own_schema_and_columns():
    crd = crd_manifest(MemcachedReconciler)
    alpha, beta = crd["spec"]["versions"]
    assert (alpha["name"], alpha["storage"], beta["name"], beta["storage"]) == ("v1alpha1", True, "v1beta1", False)
    spec = beta["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["replicas"] and set(spec["properties"]["container"]["properties"]) == {"image",
                                                                                                     "port"}
    assert {c["name"]: c["jsonPath"] for c in beta["additionalPrinterColumns"]}["Replicas"] == ".spec.replicas"
    assert {c["name"]: c["jsonPath"] for c in alpha["additionalPrinterColumns"]}["Size"] == ".spec.size"
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
