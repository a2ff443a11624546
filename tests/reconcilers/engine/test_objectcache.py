"""The object cache (reconcilers.engine.objectcache): what the workqueue stores and hands out with a claim, when a
run may take the cached object instead of a GET, and that a stale one never decides a run."""

from __future__ import annotations

import json

import pytest

from reconcilers.core.types import Request
from reconcilers.engine import kube, metrics, objectcache, runner
from reconcilers.models import Transition
from tests.reconcilers.testkinds import GADGET

GET = kube.get_object  # the test's own reads, not counted by the `gets` spy


def obj(rv: str, *, name: str = "g", deleting: bool = False, **spec) -> dict:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    return {"metadata": meta, "spec": spec}


# -- the rules -------------------------------------------------------------------------------------------------


def test_encode_and_decode_round_trip_and_garbage_decodes_to_none():
    rv, body = objectcache.encode(obj("12", size=3))
    assert rv == "12" and json.loads(body)["spec"] == {"size": 3}
    entry = rv.encode() + b" " + body
    assert objectcache.decode(entry) == obj("12", size=3)  # as written
    assert objectcache.decode(entry.decode()) == obj("12", size=3)  # as a claim returns it
    assert objectcache.decode("") is None
    assert objectcache.decode("12 {not json") is None
    assert objectcache.decode('12 ["a list"]') is None
    assert objectcache.decode('12 {"no": "metadata"}') is None


@pytest.mark.parametrize(("cached", "recorded", "usable"), [
    ("12", "", True),      # nothing on record yet
    ("12", "12", True),    # what the record saw
    ("13", "12", True),    # newer than the record
    ("11", "12", False),   # behind the record: a run wrote the object since
    ("9", "10", False),    # numerically, not as text
    ("abc", "abc", True),  # opaque versions: only equal ones
    ("abd", "abc", False),
])
def test_a_cached_object_is_usable_only_when_not_older_than_the_record(cached, recorded, usable):
    assert objectcache.usable(obj(cached), recorded) is usable


def test_an_object_being_deleted_is_never_taken_from_the_cache():
    assert objectcache.usable(obj("12", deleting=True), "") is False


# -- the workqueue's side --------------------------------------------------------------------------------------


def entry(o: dict) -> tuple[str, str]:
    return objectcache.encode(o)


def test_claim_and_claim_next_hand_out_the_cached_object_with_the_lease(queue):
    queue.cache_objects({"k1": entry(obj("5", name="a")), "k2": entry(obj("6", name="b"))})
    queue.add("k1")
    queue.add("k2")
    claim = queue.claim("k1", "me")
    assert objectcache.decode(claim.cached)["metadata"]["name"] == "a"
    nxt = queue.claim_next("me-too")
    assert nxt.key == "k2" and objectcache.decode(nxt.cached)["metadata"]["name"] == "b"
    queue.add("k3")  # nothing cached for it
    assert queue.claim("k3", "me").cached == ""


def test_an_older_version_never_replaces_a_newer_one_and_none_removes(queue):
    assert queue.cache_objects({"k": entry(obj("10", size=1))}) == 1
    assert queue.cache_objects({"k": entry(obj("9", size=0))}) == 0  # a late event of an older version
    assert queue.cache_objects({"k": entry(obj("100", size=2))}) == 1  # longer is newer (not compared as text)
    assert objectcache.decode(queue.cached("k"))["spec"] == {"size": 2}
    queue.cache_objects({"k": None})
    assert queue.cached("k") == ""


def test_opaque_versions_replace(queue):
    queue.cache_objects({"k": entry(obj("b", size=1))})
    queue.cache_objects({"k": entry(obj("a", size=2))})
    assert objectcache.decode(queue.cached("k"))["spec"] == {"size": 2}


def test_writes_are_chunked_and_prune_removes_only_the_kinds_absent_keys(queue):
    queue.cache_objects({f"g/v1/things/ns/t{i}": entry(obj(str(i), name=f"t{i}")) for i in range(7)}, chunk=3)
    queue.cache_objects({"g/v1/others/ns/o": entry(obj("1", name="o"))})
    assert queue.cache_prune("g/v1/things/", ["g/v1/things/ns/t1", "g/v1/things/ns/t5"]) == 5
    left = [k for k in (f"g/v1/things/ns/t{i}" for i in range(7)) if queue.cached(k)]
    assert left == ["g/v1/things/ns/t1", "g/v1/things/ns/t5"]
    assert queue.cached("g/v1/others/ns/o")  # another kind's entry stays


@pytest.mark.parametrize("chunk", [500, 1])  # one round trip, or the objects first in chunks of their own
def test_cache_and_add_stores_the_objects_before_queueing_their_keys(queue, chunk):
    queue.add("k2")  # already queued: coalesced
    queue.cache_objects({"k3": entry(obj("50", size=5))})
    sent, held = queue.cache_and_add({"k1": entry(obj("5", name="a")), "k2": entry(obj("6", name="b")),
                                      "k3": entry(obj("49", size=4)), "gone": None}, ["k1", "k2"], chunk=chunk)
    assert (sent, held) == (["k1"], [])
    assert objectcache.decode(queue.claim("k1", "me").cached)["metadata"]["name"] == "a"
    assert objectcache.decode(queue.cached("k2"))["metadata"]["name"] == "b"
    assert objectcache.decode(queue.cached("k3"))["spec"] == {"size": 5}  # an older version never replaces
    assert queue.cached("gone") == ""
    assert queue.cache_and_add({}, ["k4"], chunk=chunk) == (["k4"], [])


# -- a run -----------------------------------------------------------------------------------------------------


@pytest.fixture
def gets(monkeypatch):
    """The runner's GETs of its object, counted."""
    seen: list[str] = []
    real = kube.get_object

    def spy(api, kind, namespace, name):
        seen.append(name)
        return real(api, kind, namespace, name)

    monkeypatch.setattr(kube, "get_object", spy)
    return seen


def reads(source: str) -> float:
    return metrics.OBJECT_READS.labels("gadget", source)._value.get()


def live(kapi, key):
    req = Request.from_key(key)
    return GET(kapi, GADGET, req.namespace, req.name)


@pytest.mark.integration
@pytest.mark.django_db
def test_a_run_takes_its_object_from_the_cache_without_a_get(make, kapi, workqueue, gets, monkeypatch):
    key, created = make(mode="ok")
    workqueue.cache_objects({key: entry(created)})
    before = reads(objectcache.CACHE)
    assert runner.run(key) == "success"
    assert gets == [] and reads(objectcache.CACHE) == before + 1
    assert live(kapi, key)["status"]["phase"] == "Running"
    assert list(Transition.objects.filter(resource_uid=created["metadata"]["uid"]).values_list("to_phase", flat=True)
                .order_by("seq")) == ["Pending", "Running"]


@pytest.mark.integration
@pytest.mark.django_db
def test_a_cache_behind_the_record_is_read_again_with_a_get(make, kapi, workqueue, gets):
    key, created = make(mode="ok")
    workqueue.cache_objects({key: entry(created)})
    runner.run(key)  # wrote the status: the record saw a newer version than the cache holds
    gets.clear()
    before = reads(objectcache.STALE)
    assert runner.run(key) == "success"
    assert gets == ["g"] and reads(objectcache.STALE) == before + 1


@pytest.mark.integration
@pytest.mark.django_db
def test_a_change_the_cache_has_not_seen_writes_nothing_and_the_run_after_the_controller_s_write_sees_it(
        make, kapi, workqueue, gets):
    """The cache holds the version the record saw, and the object changed since (the controller's watch has not
    delivered it yet): the run decides from what it read, as a controller-runtime worker reading its informer cache
    does. Nothing of it reaches the object (nothing to write) nor the record (no transition); the controller then
    writes the new version and enqueues the key, and that run decides from the new spec."""
    key, created = make(mode="ok")
    runner.run(key)
    seen = live(kapi, key)
    workqueue.cache_objects({key: entry(seen)})  # the run's own write, as the controller's watch delivered it
    req = Request.from_key(key)
    kube.patch_object(kapi, GADGET, req.namespace, "g", {"spec": {"mode": "permanent"}})
    gets.clear()
    assert runner.run(key) == "success"
    assert live(kapi, key)["status"] == seen["status"] and gets == []
    uid = created["metadata"]["uid"]
    assert Transition.objects.filter(resource_uid=uid).count() == 2
    workqueue.cache_objects({key: entry(live(kapi, key))})  # the controller saw the change
    assert runner.run(key) == "error"
    status = live(kapi, key)["status"]
    assert status["phase"] == "Failed" and status["reason"] == "GadgetBroken" and status["observedGeneration"] == 2


@pytest.mark.integration
@pytest.mark.django_db
def test_a_status_write_from_a_cached_read_that_meets_a_409_reads_the_live_object(make, kapi, workqueue, gets):
    """The object changes between the cached read and the status write (the reconciler itself touches it): the
    write carries the cached resourceVersion, the API answers 409, and the run reads the live object and writes
    again; the concurrent change survives."""
    key, created = make(mode="conflict")
    workqueue.cache_objects({key: entry(created)})
    assert runner.run(key) == "success"
    after = live(kapi, key)
    assert after["status"]["phase"] == "Running"
    assert "test.opsconsole.io/touched" in after["metadata"]["annotations"]
    assert gets == ["g"]  # the one GET: the re-read after the 409


@pytest.mark.integration
@pytest.mark.django_db
def test_an_object_being_deleted_is_read_with_a_get(make, kapi, workqueue, gets):
    key, created = make(mode="ok")
    runner.run(key)
    req = Request.from_key(key)
    kube.delete_object(kapi, GADGET, req.namespace, "g")
    deleting = live(kapi, key)
    assert deleting["metadata"].get("deletionTimestamp")
    workqueue.cache_objects({key: entry(deleting)})
    gets.clear()
    runner.run(key)
    assert gets and gets[0] == "g"


@pytest.mark.integration
@pytest.mark.django_db
def test_the_cache_can_be_turned_off(make, kapi, workqueue, gets, settings):
    settings.OPSCONSOLE_OBJECT_CACHE = False
    key, created = make(mode="ok")
    workqueue.cache_objects({key: entry(created)})
    assert runner.run(key) == "success"
    assert gets == ["g"]
