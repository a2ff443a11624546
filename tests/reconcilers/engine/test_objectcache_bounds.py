"""The object cache bounded and slimmed (issue 40): a cap on entries past which new keys are left out (their runs
GET them), counted in a metric; children's entries without managedFields and the last-applied annotation, the
reconciled objects' entries whole (a run reads their managedFields)."""

from __future__ import annotations

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import metrics, objectcache
from reconcilers.engine.controller.events import InformerEvent
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.kindmap import KindMap
from reconcilers.engine.controller.routing import EventRouter
from reconcilers.engine.leanobject import LAST_APPLIED

MEMCACHED = ResourceKind("cache.example.com", "v1alpha1", "memcacheds", "Memcached")
DEPLOYMENT = ResourceKind("apps", "v1", "deployments", "Deployment")


def heavy(name: str, rv: str = "1", **extra) -> dict:
    """An object as kubectl apply and a field manager leave it."""
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv,
                         "annotations": {LAST_APPLIED: '{"spec": {"size": 1}}' * 20, "team": "cache"},
                         "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                            "fieldsV1": {"f:spec": {"f:size": {}}}}] * 3, **extra},
            "spec": {"size": 1}}


def skipped(queue) -> float:
    return metrics.OBJECT_CACHE_SKIPPED.labels(queue.name)._value.get()


def test_past_the_cap_new_keys_are_left_out_counted_while_held_ones_move_forward(queue):
    queue.cache_max_entries = 3
    stored = queue.cache_objects({f"k{i}": objectcache.encode(heavy(f"o{i}")) for i in range(5)})
    assert stored == 3 and queue.cache_entries() == 3
    assert queue.cache_skipped == 2 and skipped(queue) == 2
    assert [bool(queue.cached(f"k{i}")) for i in range(5)] == [True, True, True, False, False]
    assert queue.cache_objects({"k0": objectcache.encode(heavy("o0", "2"))}) == 1  # a held key moves forward
    assert objectcache.decode(queue.cached("k0"))["metadata"]["resourceVersion"] == "2"
    queue.cache_objects({"k1": None})  # a deletion frees a place
    assert queue.cache_objects({"k4": objectcache.encode(heavy("o4"))}) == 1 and queue.cache_entries() == 3


def test_cache_and_add_queues_every_key_even_those_the_cap_left_out(queue):
    queue.cache_max_entries = 1
    entries = {"a": objectcache.encode(heavy("a")), "b": objectcache.encode(heavy("b"))}
    sent, held = queue.cache_and_add(entries, ["a", "b"])
    assert sorted(sent + held) == ["a", "b"]
    assert queue.cache_skipped == 1 and skipped(queue) == 1
    assert queue.claim("b", "me").cached == ""  # no entry: the run GETs its object (objectcache.read)
    assert objectcache.decode(queue.claim("a", "me").cached)["metadata"]["name"] == "a"


def test_no_cap_by_default_on_a_queue_and_the_setting_bounds_the_controller_s(queue, settings):
    assert queue.cache_max_entries == 0
    queue.cache_objects({f"k{i}": objectcache.encode(heavy(f"o{i}")) for i in range(20)})
    assert queue.cache_entries() == 20 and queue.cache_skipped == 0
    assert objectcache.max_entries() == objectcache.MAX_ENTRIES
    settings.OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES = 7
    assert objectcache.max_entries() == 7


def test_a_child_s_entry_is_slim_and_takes_less_redis_memory(queue):
    child = heavy("d")
    queue.cache_objects({"whole": objectcache.encode(child), "child": objectcache.encode_child(child)})
    cached = objectcache.decode(queue.cached("child"))
    assert "managedFields" not in cached["metadata"]
    assert cached["metadata"]["annotations"] == {"team": "cache"}
    assert cached["spec"] == child["spec"] and cached["metadata"]["uid"] == "uid-d"
    key = queue.keys[8]
    whole = queue.redis.memory_usage(key)
    queue.cache_objects({"whole": None})
    assert queue.redis.memory_usage(key) * 2 < whole  # the slim entry is less than half the whole one


def test_a_child_refreshed_by_a_run_stays_slim(queue):
    queue.cache_objects({"child": objectcache.encode_child(heavy("d"))})
    objectcache.ChildCache(queue).put("child", heavy("d", "7"))
    cached = objectcache.decode(queue.cached("child"))
    assert cached["metadata"]["resourceVersion"] == "7" and "managedFields" not in cached["metadata"]


class _Rec:
    """What KindMap reads of a reconciler."""

    name = "memcached"
    resource = MEMCACHED
    owns = (DEPLOYMENT,)


def test_the_controller_hands_off_children_slim_and_reconciled_objects_whole():
    handoff = Handoff()
    kinds = KindMap.of([_Rec()])

    class Informers:
        def key_for_uid(self, kind, uid):
            return None

    router = EventRouter(handoff, kinds, Informers(), mirror=False, object_cache=True, archive=None)
    primary, child = heavy("m"), heavy("m", ownerReferences=[{"kind": "Memcached", "uid": "uid-m",
                                                               "controller": True, "name": "m"}])
    router.handle(InformerEvent("ADDED", MEMCACHED, primary))
    router.handle(InformerEvent("ADDED", DEPLOYMENT, child))
    objects, _ = handoff.take_objects_and_keys(10)
    assert objects["cache.example.com/v1alpha1/memcacheds/ns/m"] == primary  # managedFields: provenance reads them
    slim = objects["apps/v1/deployments/ns/m"]
    assert "managedFields" not in slim["metadata"] and LAST_APPLIED not in slim["metadata"]["annotations"]
    assert slim["metadata"]["ownerReferences"] == child["metadata"]["ownerReferences"]

