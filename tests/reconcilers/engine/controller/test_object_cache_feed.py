"""The controller feeds the object cache (reconcilers.engine.objectcache): every object of a reconciled or owned kind
its informer reports is written before any key of the same batch is enqueued, a deletion removes it, a failed write
keeps objects and keys for the next step, a list prunes the entries the cluster no longer has, and the controller
says that it keeps the cache while its informers run (and no longer once they stop)."""

from __future__ import annotations

import threading

import pytest

from reconcilers.engine import kube
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import DEPLOYMENT, WIDGET, WidgetReconciler, widget
from tests.reconcilers.engine.controller.test_controller import deployment, drive, key


class Log:
    """Records cache writes and enqueues in the order the controller made them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, object]] = []
        self.fail_writes = 0
        self.prunes: list[tuple[str, list[str]]] = []
        self.live: list[float | None] = []

    def cache_write(self, objects):
        with self.lock:
            if self.fail_writes:
                self.fail_writes -= 1
                raise ConnectionError("redis away")
            self.calls.append(("cache", dict(objects)))

    def enqueue(self, k):
        with self.lock:
            self.calls.append(("enqueue", k))
        return True

    def cache_prune(self, prefix, present):
        with self.lock:
            self.prunes.append((prefix, sorted(present)))

    def cache_live(self, ttl):
        with self.lock:
            self.live.append(ttl)

    def cached(self, k):
        """The newest object written for k (None: removed; KeyError: never written)."""
        with self.lock:
            found = [objs[k] for what, objs in self.calls if what == "cache" and k in objs]
        if not found:
            raise KeyError(k)
        return found[-1]

    def first(self, what, k):
        with self.lock:
            for i, (kind, value) in enumerate(self.calls):
                if kind == what and (value == k if what == "enqueue" else k in value):
                    return i
        return None


@pytest.fixture
def fed(api, widget_kind):
    log = Log()
    controller = build_controller(api, [WidgetReconciler()], enqueue=log.enqueue, cache_write=log.cache_write,
                                  cache_prune=log.cache_prune, cache_live=log.cache_live, pump=lambda: 0, mirror=False,
                                  object_cache=True)
    controller.step()
    assert controller.wait_synced(10)
    yield controller, log
    controller.shutdown()


def test_an_object_is_in_the_cache_before_its_key_is_enqueued_and_a_deletion_removes_it(api, ns, fed):
    controller, log = fed
    kube.create_object(api, WIDGET, widget("a", ns))
    k = key(ns, "a")
    drive(controller, lambda: log.first("enqueue", k) is not None)
    assert log.first("cache", k) < log.first("enqueue", k)
    assert log.cached(k)["metadata"]["name"] == "a"
    # a change that enqueues nothing (a label) still reaches the cache
    patched = kube.patch_object(api, WIDGET, ns, "a", {"metadata": {"labels": {"seen": "yes"}}})
    drive(controller, lambda: (log.cached(k)["metadata"].get("labels") or {}).get("seen") == "yes")
    assert log.cached(k)["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    kube.delete_object(api, WIDGET, ns, "a")
    drive(controller, lambda: log.cached(k) is None)


def test_a_failed_cache_write_keeps_the_objects_and_the_keys_for_the_next_step(api, ns, fed):
    controller, log = fed
    controller.step()
    log.fail_writes = 1
    kube.create_object(api, WIDGET, widget("b", ns))
    k = key(ns, "b")
    drive(controller, lambda: log.first("enqueue", k) is not None, timeout=10)
    assert log.first("cache", k) < log.first("enqueue", k)  # nothing was enqueued before the write that worked


def test_a_list_prunes_the_kind_s_entries_the_cluster_no_longer_has(api, ns, fed):
    controller, log = fed
    kube.create_object(api, WIDGET, widget("c", ns))
    drive(controller, lambda: log.first("enqueue", key(ns, "c")) is not None)
    informer = controller.informers[(WIDGET.group, WIDGET.plural)]
    informer.relist()
    drive(controller, lambda: bool(log.prunes))
    prefix, present = log.prunes[-1]
    assert prefix == f"{WIDGET.group}/{WIDGET.version}/{WIDGET.plural}/"
    assert key(ns, "c") in present


def test_the_controller_writes_no_cache_when_it_is_off(api, ns, widget_kind, settings):
    settings.OPSCONSOLE_OBJECT_CACHE = False
    log = Log()
    controller = build_controller(api, [WidgetReconciler()], enqueue=log.enqueue, cache_write=log.cache_write,
                                  pump=lambda: 0, mirror=False)
    try:
        controller.step()
        assert controller.wait_synced(10)
        kube.create_object(api, WIDGET, widget("d", ns))
        drive(controller, lambda: log.first("enqueue", key(ns, "d")) is not None)
        assert not any(what == "cache" for what, _ in log.calls)
    finally:
        controller.shutdown()


def test_a_child_is_in_the_cache_before_its_owner_s_key_is_enqueued_again(api, ns, fed):
    """An owned kind's objects are cached too (runs compare their applies with them): a child's change reaches
    the cache before the key of the owner it enqueues, and its deletion removes it."""
    controller, log = fed
    owner = kube.create_object(api, WIDGET, widget("o", ns))
    drive(controller, lambda: log.first("enqueue", key(ns, "o")) is not None)
    with log.lock:
        log.calls.clear()
    child = kube.create_object(api, DEPLOYMENT, deployment("o-child", ns, owner))
    ck = DEPLOYMENT.request(ns, "o-child").key()
    drive(controller, lambda: log.first("enqueue", key(ns, "o")) is not None)
    assert log.first("cache", ck) < log.first("enqueue", key(ns, "o"))
    assert log.cached(ck)["metadata"]["uid"] == child["metadata"]["uid"]
    kube.delete_object(api, DEPLOYMENT, ns, "o-child")
    drive(controller, lambda: log.cached(ck) is None)
    controller.informers[(DEPLOYMENT.group, DEPLOYMENT.plural)].relist()
    drive(controller, lambda: any(p[0] == f"{DEPLOYMENT.group}/{DEPLOYMENT.version}/{DEPLOYMENT.plural}/"
                                  for p in log.prunes))


def test_the_controller_says_it_keeps_the_cache_while_its_informers_run(api, ns, widget_kind):
    now = [100.0]
    log = Log()
    controller = build_controller(api, [WidgetReconciler()], enqueue=log.enqueue, cache_write=log.cache_write,
                                  cache_prune=log.cache_prune, cache_live=log.cache_live, pump=lambda: 0, mirror=False,
                                  object_cache=True, clock=lambda: now[0])
    try:
        controller.step()
        assert controller.wait_synced(10)
        controller.step()
        assert log.live == [10.0]  # once the informers have listed, for CACHE_LIVE_TTL
        controller.step()
        assert log.live == [10.0]  # renewed every CACHE_LIVE_SECONDS, not every step
        now[0] += 2.0
        controller.step()
        assert log.live == [10.0, 10.0]
    finally:
        controller.shutdown()
    assert log.live[-1] is None  # stopped: runs no longer read children from the cache


def test_objects_and_keys_are_taken_together():
    """A handler puts a child's object, then its owner's key; the loop takes both at one instant, so it never
    enqueues a key whose object it has not written."""
    h = Handoff()
    h.put_object("child", {"metadata": {"name": "c"}})
    h.put_key("owner")
    objects, keys = h.take_objects_and_keys(10)
    assert list(objects) == ["child"] and keys == ["owner"]
    h.put_key("a")
    h.put_key("b")
    objects, keys = h.take_objects_and_keys(1)
    assert objects == {} and keys == ["a"]
    assert h.take_objects_and_keys(10) == ({}, ["b"])


def test_by_default_a_batch_s_objects_and_keys_are_one_round_trip_objects_first(api, ns, widget_kind, queue,
                                                                                 monkeypatch):
    from reconcilers.engine import dispatch

    ops: list[str] = []
    sent: list[str] = []
    run = queue._run
    monkeypatch.setattr(queue, "_run", lambda op, *args: ops.append(op) or run(op, *args))
    monkeypatch.setattr(dispatch, "get_queue", lambda: queue)
    monkeypatch.setattr(dispatch, "dispatch", lambda keys: sent.extend(keys) or len(sent))
    controller = build_controller(api, [WidgetReconciler()], pump=lambda: 0, mirror=False, object_cache=True,
                                  cache_prune=lambda prefix, present: None, cache_live=lambda ttl: None)
    try:
        controller.step()
        assert controller.wait_synced(10)
        kube.create_object(api, WIDGET, widget("one", ns))
        k = key(ns, "one")
        drive(controller, lambda: k in sent)
        assert queue.claim(k, "me").cached  # the object came with the key
        assert "cache_add" in ops and not {"cache", "add_many"} & set(ops)
    finally:
        controller.shutdown()
