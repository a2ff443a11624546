"""Children's applies that would change nothing are not sent (reconcilers.engine.childcache): the rule, exact for
server-side apply, and its use against kubesim with the workqueue's object cache in Redis — a child someone changed
is put back, a field the manifest no longer names is removed, a cache the controller no longer keeps is not read,
and the cache moves forward to the run's own writes but never brings a deleted child back."""

from __future__ import annotations

import pytest

from reconcilers.core.meta import APPLIED_DIGEST
from reconcilers.engine import kube, metrics, objectcache, runner
from reconcilers.engine.childcache import apply_unchanged, manifest_digest, with_digest
from reconcilers.engine.context import EngineContext
from reconcilers.engine.leanobject import slim
from reconcilers.engine.workqueue import WorkQueue
from reconcilers.kinds.memcached import DEPLOYMENT, SERVICE, MemcachedReconciler
from tests.reconcilers.testkinds import GADGET, GadgetReconciler, gadget

CONFIGMAP_KEY = "/v1/configmaps/{ns}/{name}"


def configmap(name: str, labels: dict | None = None, **data: str) -> dict:
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


# -- the rule --------------------------------------------------------------------------------------------------


def test_the_digest_follows_every_value_but_not_its_own_annotation():
    m = configmap("c", a="1")
    assert manifest_digest(m) == manifest_digest(with_digest(m))
    assert manifest_digest(m) != manifest_digest(configmap("c", a="2"))
    assert manifest_digest(m) != manifest_digest(configmap("c", {"x": "1"}, a="1"))
    assert with_digest(m)["metadata"]["annotations"] == {APPLIED_DIGEST: manifest_digest(m)}
    assert "annotations" not in m["metadata"]  # the manifest passed in is left as it was


def live_of(manifest: dict, **changes) -> dict:
    """The manifest as the API server would hold it: defaults and metadata added."""
    live = {**manifest, "metadata": {**manifest["metadata"], "uid": "u1", "resourceVersion": "7",
                                     "managedFields": [{"manager": "m"}]}, "data": dict(manifest["data"])}
    live["data"].update(changes)
    return live


def test_an_apply_is_unchanged_only_for_the_same_manifest_and_every_value_it_names():
    applied = with_digest(configmap("c", {"x": "1"}, a="1"))
    assert apply_unchanged(applied, live_of(applied))
    assert apply_unchanged(applied, live_of(applied, extra="added by someone else"))  # not the manager's field
    assert not apply_unchanged(applied, live_of(applied, a="2"))  # a value someone changed: put back
    assert not apply_unchanged(applied, None)
    deleting = live_of(applied)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    assert not apply_unchanged(applied, deleting)
    # the manifest no longer names label x: the live child still has it, but its digest is the old manifest's, so
    # the apply is sent (and removes the label)
    fewer = with_digest(configmap("c", a="1"))
    assert not apply_unchanged(fewer, live_of(applied))
    assert not apply_unchanged(configmap("c", {"x": "1"}, a="1"), live_of(applied))  # no digest: always sent


@pytest.mark.parametrize(("want", "live", "same"), [
    ({"n": 1}, {"n": 1, "d": 2}, True),
    ({"n": 1}, {"n": True}, False),  # JSON true is not 1
    ({"n": True}, {"n": True}, True),
    ({"n": None}, {}, True),  # null: the field absent
    ({"n": None}, {"n": 1}, False),
    ({"l": [{"a": 1}]}, {"l": [{"a": 1, "default": "x"}]}, True),
    ({"l": [{"a": 1}]}, {"l": [{"a": 1}, {"a": 2}]}, False),  # an element someone added
    ({"l": [1, 2]}, {"l": [2, 1]}, False),
    ({"s": "80"}, {"s": 80}, False),
])
def test_values_compare_as_json(want, live, same):
    applied = with_digest({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}, "spec": want})
    held = {**applied, "spec": live}
    assert apply_unchanged(applied, held) is same


# -- against the API server and Redis ---------------------------------------------------------------------------


def _patches() -> float:
    from prometheus_client import REGISTRY

    return sum(s.value for m in REGISTRY.collect() if m.name == "rest_client_requests"
               for s in m.samples if s.name.endswith("_total") and s.labels.get("method") == "PATCH")


@pytest.fixture
def ctx(kapi, namespace, queue):
    obj = kube.create_object(kapi, GADGET, gadget(namespace, "g1"))
    ctx = EngineContext(GadgetReconciler(), obj, kapi, child_cache=objectcache.ChildCache(queue))
    ctx.resolve("v1", "ConfigMap")  # discovery, cached from here on
    return ctx


def controller_sees(kapi, queue, namespace: str, name: str) -> dict:
    """What the controller does when its ConfigMap informer reports the child: the cache holds it, and the
    controller says it keeps the cache."""
    live = kube.get_object(kapi, kube.kind_for(kapi, "v1", "ConfigMap"), namespace, name)
    queue.cache_objects({CONFIGMAP_KEY.format(ns=namespace, name=name): objectcache.encode(live)})
    queue.cache_live(10)
    return live


@pytest.mark.integration
def test_an_apply_that_would_change_nothing_is_not_sent_and_answers_with_the_cached_child(ctx, kapi, namespace,
                                                                                         queue):
    first = ctx.apply_child(configmap("c1", a="1"))
    assert first["metadata"]["annotations"][APPLIED_DIGEST] == manifest_digest(
        {**configmap("c1", a="1"), "metadata": {"name": "c1", "namespace": namespace,
                                                "ownerReferences": [ctx.owner_reference()]}})
    seen = controller_sees(kapi, queue, namespace, "c1")
    before = _patches()
    again = ctx.apply_child(configmap("c1", a="1"))
    assert _patches() == before and again == seen and ctx.children[-1] == seen
    assert (ctx.applies_sent, ctx.applies_unchanged) == (1, 1)


@pytest.mark.integration
def test_without_a_controller_keeping_the_cache_every_apply_is_sent(ctx, kapi, namespace, queue):
    ctx.apply_child(configmap("c1", a="1"))
    controller_sees(kapi, queue, namespace, "c1")
    queue.cache_live(None)  # the controller stopped (or its liveness lapsed): the cache may miss changes
    before = _patches()
    ctx.apply_child(configmap("c1", a="1"))
    assert _patches() == before + 1


@pytest.mark.integration
def test_a_child_someone_changed_is_put_back(ctx, kapi, namespace, queue):
    ctx.apply_child(configmap("c1", a="1"))
    cm = kube.kind_for(kapi, "v1", "ConfigMap")
    kube.patch_object(kapi, cm, namespace, "c1", {"data": {"a": "edited"}}, field_manager="kubectl-edit")
    controller_sees(kapi, queue, namespace, "c1")
    back = ctx.apply_child(configmap("c1", a="1"))
    assert back["data"] == {"a": "1"} and kube.get_object(kapi, cm, namespace, "c1")["data"] == {"a": "1"}
    # the cache moved forward to the apply's answer: the next run finds nothing to do
    assert objectcache.decode(queue.cached(CONFIGMAP_KEY.format(ns=namespace, name="c1")))["metadata"][
        "resourceVersion"] == back["metadata"]["resourceVersion"]
    before = _patches()
    ctx.apply_child(configmap("c1", a="1"))
    assert _patches() == before


@pytest.mark.integration
def test_a_field_the_manifest_no_longer_names_is_removed(ctx, kapi, namespace, queue):
    ctx.apply_child(configmap("c1", {"tier": "cache"}, a="1"))
    controller_sees(kapi, queue, namespace, "c1")
    after = ctx.apply_child(configmap("c1", a="1"))
    assert "tier" not in (after["metadata"].get("labels") or {})
    cm = kube.kind_for(kapi, "v1", "ConfigMap")
    assert "tier" not in (kube.get_object(kapi, cm, namespace, "c1")["metadata"].get("labels") or {})


@pytest.mark.integration
def test_the_cache_only_moves_forward_and_a_run_never_adds_an_entry(ctx, kapi, namespace, queue):
    key = CONFIGMAP_KEY.format(ns=namespace, name="c1")
    queue.cache_live(10)
    ctx.apply_child(configmap("c1", a="1"))  # nothing cached yet: the run's answer is not stored
    assert queue.cached(key) == ""
    seen = controller_sees(kapi, queue, namespace, "c1")
    changed = ctx.apply_child(configmap("c1", a="2"))
    assert changed["metadata"]["managedFields"]  # the apply's answer, whole; its entry is slim (leanobject)
    assert objectcache.decode(queue.cached(key)) == slim(changed)
    queue.cache_objects({key: objectcache.encode(seen)})  # the controller's older copy arrives late: not stored
    assert objectcache.decode(queue.cached(key)) == slim(changed)
    queue.cache_objects({key: None})  # the controller saw the child deleted
    ctx.apply_child(configmap("c1", a="3"))
    assert queue.cached(key) == ""  # the apply that raced the deletion does not bring it back


@pytest.mark.integration
@pytest.mark.django_db
def test_a_memcached_s_second_run_applies_nothing_and_counts_it(kapi, namespace, workqueue, reconcilers):
    """The run after the Deployment became ready (the bench's second run of every Memcached): both children are
    as the first run applied them, so neither PATCH is sent; the run still reads the ready Deployment (from the
    cache) and the Memcached becomes Running."""
    key = _memcached_cached(kapi, namespace, workqueue, reconcilers)
    assert runner.run(key) == "requeue_after"  # Pending: the rollout has begun
    ready = _ready(kapi, namespace)
    for kind in (DEPLOYMENT, SERVICE):
        live = kube.get_object(kapi, kind, namespace, "mc")
        workqueue.cache_objects({kind.request(namespace, "mc").key(): objectcache.encode(live)})
    workqueue.cache_live(10)
    workqueue.add(key)
    unchanged = metrics.CHILD_APPLIES.labels("memcached", "unchanged")._value.get()
    before = _patches()
    assert runner.run(key) == "success"
    assert _patches() == before
    assert metrics.CHILD_APPLIES.labels("memcached", "unchanged")._value.get() == unchanged + 2
    mc = kube.get_object(kapi, MemcachedReconciler.resource, namespace, "mc")
    assert mc["status"]["phase"] == "Running" and mc["status"]["readyReplicas"] == ready


@pytest.mark.integration
@pytest.mark.django_db
def test_a_first_run_applies_its_children_without_looking_them_up(kapi, namespace, workqueue, reconcilers,
                                                                  monkeypatch):
    """No phase on record yet: the children are applied (an apply is always safe) without a cache lookup, which
    in a burst would find nothing; even a child that is cached as applied is applied again."""
    key = _memcached_cached(kapi, namespace, workqueue, reconcilers)
    workqueue.cache_live(10)
    lookups = []
    real = WorkQueue.cached_child
    monkeypatch.setattr(WorkQueue, "cached_child", lambda self, k: lookups.append(k) or real(self, k))
    before = _patches()
    assert runner.run(key) == "requeue_after"
    assert _patches() == before + 2 and lookups == []
    for kind in (DEPLOYMENT, SERVICE):  # as applied, in the cache; the record now has a phase
        live = kube.get_object(kapi, kind, namespace, "mc")
        workqueue.cache_objects({kind.request(namespace, "mc").key(): objectcache.encode(live)})
    workqueue.add(key)
    runner.run(key)
    assert len(lookups) == 2  # the second run looks both up


def _memcached_cached(kapi, namespace, workqueue, reconcilers) -> str:
    """A Memcached `mc` created and in the object cache, as the controller would have put it; its key."""
    reconcilers(["reconcilers.kinds.memcached.MemcachedReconciler"])
    obj = kube.create_object(kapi, MemcachedReconciler.resource, {
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": namespace}, "spec": {"size": 1}})
    key = MemcachedReconciler.resource.request(namespace, "mc").key()
    workqueue.cache_objects({key: objectcache.encode(obj)})
    return key


def _ready(kapi, namespace) -> int:
    """Wait until kubesim's deployment controller reports the Deployment ready; its ready replicas."""
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        dep = kube.get_object(kapi, DEPLOYMENT, namespace, "mc")
        if dep and (dep.get("status") or {}).get("readyReplicas") == 1:
            return 1
        time.sleep(0.05)
    raise AssertionError("the Deployment did not become ready")
