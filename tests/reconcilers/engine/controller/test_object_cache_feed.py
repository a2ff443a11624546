"""The controller feeds the object cache (reconcilers.engine.objectcache): every object of a reconciled kind its
informer reports is written before any key of the same batch is enqueued, a deletion removes it, a failed write
keeps objects and keys for the next step, and a list prunes the entries the cluster no longer has."""

from __future__ import annotations

import threading

import pytest

from reconcilers.engine import kube
from reconcilers.engine.controller import Controller
from tests.reconcilers.engine.controller.kinds import WIDGET, WidgetReconciler, widget
from tests.reconcilers.engine.controller.test_controller import drive, key


class Log:
    """Records cache writes and enqueues in the order the controller made them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, object]] = []
        self.fail_writes = 0
        self.prunes: list[tuple[str, list[str]]] = []

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
    controller = Controller(api, [WidgetReconciler()], enqueue=log.enqueue, cache_write=log.cache_write,
                            cache_prune=log.cache_prune, pump=lambda: 0, mirror=False, object_cache=True)
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
    controller = Controller(api, [WidgetReconciler()], enqueue=log.enqueue, cache_write=log.cache_write,
                            pump=lambda: 0, mirror=False)
    try:
        controller.step()
        assert controller.wait_synced(10)
        kube.create_object(api, WIDGET, widget("d", ns))
        drive(controller, lambda: log.first("enqueue", key(ns, "d")) is not None)
        assert not any(what == "cache" for what, _ in log.calls)
    finally:
        controller.shutdown()
