"""What the controller's informer caches keep of an object (slim.py): the slim object, the Event stub, packing; and the
child filter, which compares a delivered object with its slim previous state."""

from __future__ import annotations

import copy
import tracemalloc

import pytest

from reconcilers.core.meta import AUTO_ROLLBACK, RECONCILE_REQUESTED_AT
from reconcilers.engine.controller.events import MODIFIED, InformerEvent, child_changed
from reconcilers.engine.controller.slim import LAST_APPLIED, Packer, event_stub, pack, slim, unpack
from tests.reconcilers.engine.controller.kinds import DEPLOYMENT

MANAGED = [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1",
            "time": "2026-12-07T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]


def deployment(**meta):
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", "generation": 3,
            "labels": {"app": "web"}, "finalizers": ["x.io/hold"], "deletionTimestamp": "2026-12-07T10:00:01Z",
            "ownerReferences": [{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "m",
                                 "uid": "owner-1", "controller": True}],
            "annotations": {LAST_APPLIED: '{"spec": {"replicas": 2}}', RECONCILE_REQUESTED_AT: "t1",
                            AUTO_ROLLBACK: "true"},
            "managedFields": copy.deepcopy(MANAGED), **meta,
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"observedGeneration": 3, "readyReplicas": 2, "conditions": [{"type": "Available"}]},
    }


def test_slim_drops_managed_fields_and_the_last_applied_annotation_and_keeps_everything_else():
    obj = deployment()
    kept = slim(obj)
    meta = kept["metadata"]
    assert "managedFields" not in meta
    assert LAST_APPLIED not in meta["annotations"]
    assert meta["annotations"] == {RECONCILE_REQUESTED_AT: "t1", AUTO_ROLLBACK: "true"}
    for field in ("name", "namespace", "uid", "resourceVersion", "generation", "labels", "finalizers",
                  "deletionTimestamp", "ownerReferences"):
        assert meta[field] == obj["metadata"][field]
    assert kept["spec"] == obj["spec"] and kept["status"] == obj["status"]
    assert kept["apiVersion"] == "apps/v1" and kept["kind"] == "Deployment"
    # the delivered object is untouched (the handlers and the object cache get it whole)
    assert obj["metadata"]["managedFields"] == MANAGED and LAST_APPLIED in obj["metadata"]["annotations"]


def test_slim_is_idempotent_drops_an_emptied_annotations_map_and_leaves_a_lean_object_as_it_is():
    only_last_applied = deployment(annotations={LAST_APPLIED: "{}"})
    assert "annotations" not in slim(only_last_applied)["metadata"]
    assert slim(slim(deployment())) == slim(deployment())
    lean = slim(deployment())
    assert slim(lean) is lean
    assert slim({"kind": "NoMetadata"}) == {"kind": "NoMetadata"}


def test_an_event_stub_keeps_what_the_archive_reads_of_a_previous_state():
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "ns", "uid": "e-1", "resourceVersion": "9",
                     "creationTimestamp": "2026-12-07T10:00:00Z", "managedFields": copy.deepcopy(MANAGED)},
        "involvedObject": {"kind": "Pod", "name": "web-1", "uid": "p-1"}, "reason": "BackOff",
        "message": "Back-off restarting failed container", "count": 4, "type": "Warning",
        "series": {"count": 4, "lastObservedTime": "2026-12-07T10:00:00Z"},
        "source": {"component": "kubelet"},
    }
    assert event_stub(event) == {"metadata": {"name": "web.1", "namespace": "ns", "uid": "e-1",
                                              "resourceVersion": "9"},
                                 "count": 4, "series": {"count": 4}}
    assert event_stub({"metadata": {"name": "e", "uid": "u"}}) == {"metadata": {"name": "e", "uid": "u"}}


def test_pack_and_unpack_give_back_an_equal_new_dict():
    kept = slim(deployment())
    data = pack(kept)
    assert isinstance(data, bytes)
    assert unpack(data) == kept and unpack(data) is not unpack(data)
    assert len(data) < len(pack(deployment()))


def test_a_child_s_change_of_only_managed_fields_or_the_last_applied_annotation_is_no_change():
    previous = slim(deployment())  # as the informer cache keeps it
    delivered = deployment(resourceVersion="8")
    delivered["metadata"]["managedFields"].append({"manager": "other", "operation": "Apply"})
    delivered["metadata"]["annotations"][LAST_APPLIED] = '{"spec": {"replicas": 3}}'
    assert not child_changed(InformerEvent(MODIFIED, DEPLOYMENT, delivered, previous))

    for change in ({"spec": {**delivered["spec"], "replicas": 3}},
                   {"status": {"readyReplicas": 1}},
                   {"metadata": {**delivered["metadata"], "labels": {"app": "other"}}},
                   {"metadata": {**delivered["metadata"], "annotations": {"x.io/note": "n"}}}):
        assert child_changed(InformerEvent(MODIFIED, DEPLOYMENT, {**delivered, **change}, previous)), change


def test_a_packed_object_holds_no_more_memory_than_its_own_bytes():
    stub = event_stub({"metadata": {"name": "web.1", "namespace": "ns", "uid": "e-1", "resourceVersion": "9"},
                       "count": 1})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        packed = [pack(stub) for _ in range(100)]
        held = (tracemalloc.get_traced_memory()[0] - before) / len(packed)
    finally:
        tracemalloc.stop()
    assert held < 2 * len(packed[0]) + 64  # not the encoder's 4 KiB buffer


def test_a_packer_packs_objects_of_one_kind_against_the_first_one_far_tighter_than_json():
    packer = Packer()
    first = slim(deployment())
    others = [slim(deployment(name=f"web-{i}", uid=f"u-{i}", resourceVersion=str(100 + i))) for i in range(50)]
    packed = [packer.pack(first)] + [packer.pack(obj) for obj in others]
    assert [packer.unpack(data) for data in packed] == [first, *others]
    assert packer.unpack(packed[1]) is not packer.unpack(packed[1])
    # the dictionary is the first object: the others cost little beyond what differs
    assert max(len(data) for data in packed[1:]) * 4 < len(pack(others[0]))
    # a differently shaped object still packs and unpacks whole (only tighter where it shares bytes)
    odd = {"metadata": {"name": "x"}, "data": {"k": "v" * 300}}
    assert packer.unpack(packer.pack(odd)) == odd


def test_a_packer_unpacks_only_what_it_packed():
    with pytest.raises(ValueError):
        Packer().unpack(b"x")


def test_a_store_counts_its_objects_without_listing_their_keys():
    from reconcilers.engine.controller.store import ObjectStore

    store = ObjectStore(keep=slim)
    for i in range(3):
        store.replace(False, f"k{i}", deployment(name=f"web-{i}", uid=f"u-{i}"))
    store.replace(True, "k1", deployment(name="web-1", uid="u-1"))
    assert len(store) == 2 == len(store.keys()) and "k1" not in store
