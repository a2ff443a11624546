"""The controller loop against a real kubesim: what enqueues, owner mapping, resync, mirror, the real queue."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from reconcilers.core.meta import RECONCILE_REQUESTED_AT
from reconcilers.engine import kube
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import DEPLOYMENT, WIDGET, WidgetReconciler, widget
from tests.support.status_patch import patch_status


class Keys:
    """A fake enqueue that remembers keys."""

    def __init__(self):
        self.keys = []
        self.lock = threading.Lock()

    def __call__(self, key):
        with self.lock:
            self.keys.append(key)
        return True

    def take(self):
        with self.lock:
            keys, self.keys = self.keys, []
            return keys


@pytest.fixture
def make_controller(api, settings):
    # a private work queue: the controller reads the queue's depth (whether keys wait) to pace mirror refreshes,
    # so keys another test left in the default queue must not slow this one
    settings.OPSCONSOLE_WORKQUEUE_NAME = f"test-ctl-{uuid.uuid4().hex[:8]}"
    controllers = []

    def make(**kwargs):
        kwargs.setdefault("enqueue", Keys())
        kwargs.setdefault("pump", lambda: 0)
        kwargs.setdefault("mirror", False)
        controller = build_controller(api, [WidgetReconciler()], **kwargs)
        controllers.append(controller)
        controller.step()  # leads (no elector): starts the informers
        assert controller.wait_synced(10)
        return controller

    yield make
    for controller in controllers:
        controller.shutdown()
    from reconcilers.engine import dispatch

    dispatch.get_queue().clear()


def drive(controller, predicate, timeout=5.0):
    """Step the controller until predicate() holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not controller.step():
            controller.handoff.wait(0.02)
        if predicate():
            return True
    raise AssertionError("condition not met while driving the controller")


def key(ns, name):
    return WIDGET.request(ns, name).key()


def settle(api, controller, ns):
    """Create a sentinel widget and drive until its key arrives: every earlier event has been handled then
    (one informer thread per kind delivers its events in order)."""
    name = f"sentinel-{time.monotonic_ns()}"
    kube.create_object(api, WIDGET, widget(name, ns))
    seen = []
    drive(controller, lambda: seen.extend(controller.enqueue.take()) or key(ns, name) in seen)
    return [k for k in seen if k != key(ns, name)]


def test_a_status_only_change_enqueues_nothing_while_spec_finalizers_deletion_and_annotation_do(
    api, widget_kind, ns, make_controller
):
    controller = make_controller()
    keys = controller.enqueue
    kube.create_object(api, WIDGET, widget("w", ns))
    assert key(ns, "w") in settle(api, controller, ns)

    patch_status(api, WIDGET, ns, "w", {"status": {"phase": "Running", "observedGeneration": 1}})
    kube.patch_object(api, WIDGET, ns, "w", {"metadata": {"labels": {"only": "labels"}}})
    assert settle(api, controller, ns) == []  # status-only and metadata-only updates: nothing

    kube.patch_object(api, WIDGET, ns, "w", {"spec": {"size": 3}})
    assert settle(api, controller, ns) == [key(ns, "w")]

    kube.patch_object(api, WIDGET, ns, "w", {"metadata": {"finalizers": ["test.opsconsole.io/hold"]}})
    assert settle(api, controller, ns) == [key(ns, "w")]

    kube.patch_object(api, WIDGET, ns, "w", {"metadata": {"annotations": {RECONCILE_REQUESTED_AT: "t1"}}})
    assert settle(api, controller, ns) == [key(ns, "w")]

    kube.delete_object(api, WIDGET, ns, "w")  # held by the finalizer: deletionTimestamp set
    assert settle(api, controller, ns) == [key(ns, "w")]
    kube.patch_object(api, WIDGET, ns, "w", {"metadata": {"finalizers": None}})  # now it goes: DELETED
    assert settle(api, controller, ns) == [key(ns, "w")]
    assert kube.get_object(api, WIDGET, ns, "w") is None
    assert keys.take() == []


def deployment(name, ns, owner=None, kind="Widget", api_version=WIDGET.api_version):
    meta = {"name": name, "namespace": ns}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True,
                                    "blockOwnerDeletion": True}]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "memcached:1.6"}]}}},
    }


def test_a_child_deployment_change_enqueues_its_owner(api, widget_kind, ns, make_controller):
    controller = make_controller()
    owner = kube.create_object(api, WIDGET, widget("owner", ns))
    settle(api, controller, ns)

    kube.create_object(api, DEPLOYMENT, deployment("child", ns, owner))
    drive(controller, lambda: key(ns, "owner") in controller.enqueue.take())
    kube.patch_object(api, DEPLOYMENT, ns, "child", {"spec": {"replicas": 2}})
    drive(controller, lambda: key(ns, "owner") in controller.enqueue.take())

    # a Deployment without an owner, or owned by another kind, enqueues no Widget
    kube.create_object(api, DEPLOYMENT, deployment("orphan", ns))
    kube.create_object(api, DEPLOYMENT, deployment("foreign", ns, owner, kind="Other", api_version="x.io/v1"))
    time.sleep(0.3)
    leftover = settle(api, controller, ns)
    assert all(k == key(ns, "owner") for k in leftover)  # only the child's own status churn, if any
    assert not any("orphan" in k or "foreign" in k for k in leftover)


def resync_period(controller, now, start, period, steps):
    """Step the controller `steps` times over one period from `start`; the keys the resync schedule gave at each
    step (each reached the enqueue in that step; events of other tests' objects may come in between)."""
    calls = []
    due = controller.resync_schedule.due
    for i in range(1, steps + 1):
        now[0] = start + i * period / steps
        controller.resync_schedule.due = lambda t: calls.append(due(t)) or calls[-1]
        try:
            controller.step()
        finally:
            del controller.resync_schedule.due
        assert set(calls[-1]) <= set(controller.enqueue.take())
    return calls


def test_the_periodic_resync_enqueues_each_cached_key_once_per_period_spread_over_it(
        api, widget_kind, ns, make_controller):
    now = [1000.0]
    controller = make_controller(resync_seconds=300, clock=lambda: now[0])
    for name in ("r1", "r2", "r3"):
        kube.create_object(api, WIDGET, widget(name, ns))
    settle(api, controller, ns)  # the first step after the list: the first period starts 300 s later
    assert controller.resync_schedule.next_at() == 1300.0

    now[0] = 1299.0
    controller.step()
    assert controller.enqueue.take() == [] and controller.resyncs == 0  # the list enqueued every key

    steps = 30
    cached = controller.cached_keys()
    calls = resync_period(controller, now, 1300.0, 300.0, steps)
    enqueued = [k for keys in calls for k in keys]
    assert {key(ns, n) for n in ("r1", "r2", "r3")} <= set(enqueued)
    assert sorted(enqueued) == sorted(cached)  # each cached key once
    assert max(len(keys) for keys in calls) <= len(cached) // steps + 1  # spread, not all at once
    assert controller.resyncs == 0  # no full resync
    kube.delete_object(api, WIDGET, ns, "r1")
    drive(controller, lambda: key(ns, "r1") in controller.enqueue.take())  # the deletion's own event
    assert key(ns, "r1") not in controller.cached_keys()
    again = [k for keys in resync_period(controller, now, 1600.0, 300.0, steps) for k in keys]
    assert sorted(again) == sorted(set(cached) - {key(ns, "r1")})  # once again; the deleted one not


class NeverResynced(WidgetReconciler):
    resync_seconds = 0


class Polled(WidgetReconciler):
    resync_seconds = 10


@pytest.mark.parametrize(("reconciler", "times"), [(NeverResynced, {0}), (Polled, {59, 60})])
def test_a_kind_s_own_resync_period_overrides_the_setting(api, widget_kind, ns, reconciler, times):
    now = [1000.0]
    keys = Keys()
    controller = build_controller(api, [reconciler()], enqueue=keys, pump=lambda: 0, mirror=False,
                                  resync_seconds=300, clock=lambda: now[0])
    try:
        kube.create_object(api, WIDGET, widget("p", ns))
        controller.step()
        assert controller.wait_synced(10)
        drive(controller, lambda: key(ns, "p") in keys.take())
        for _ in range(600):  # 600 s, a step a second: the setting's period would resync it once at most
            now[0] += 1.0
            controller.step()
        assert keys.take().count(key(ns, "p")) in times  # never, or every 10 s from 10 s after the list
    finally:
        controller.shutdown()


def test_after_a_workqueue_outage_every_key_is_enqueued_at_once_not_spread(api, widget_kind, ns, make_controller):
    now = [1000.0]
    controller = make_controller(resync_seconds=300, clock=lambda: now[0])
    for name in ("o1", "o2"):
        kube.create_object(api, WIDGET, widget(name, ns))
    settle(api, controller, ns)
    controller.feed.resync_now = True  # what QueueFeed.recovered() sets when the queue answers again
    assert controller.step() is True
    assert controller.resyncs == 1
    assert sorted(controller.enqueue.take()) == sorted(controller.cached_keys())  # in one step
    assert controller.resync_schedule.next_at() == 1300.0  # the spread resync goes on as it was


@pytest.mark.django_db
def test_the_mirror_follows_the_objects(api, widget_kind, ns, make_controller):
    from reconcilers.models import Resource

    controller = make_controller(mirror=True)
    created = kube.create_object(api, WIDGET, {**widget("m", ns), "metadata": {
        "name": "m", "namespace": ns, "labels": {"team": "a"}}})
    uid = created["metadata"]["uid"]
    drive(controller, lambda: Resource.objects.filter(uid=uid).exists())
    kube.patch_object(api, WIDGET, ns, "m", {"spec": {"size": 4}})
    drive(controller, lambda: Resource.objects.get(uid=uid).generation == 2)
    row = Resource.objects.get(uid=uid)
    assert (row.namespace, row.name, row.labels, row.spec["size"]) == (ns, "m", {"team": "a"}, 4)
    kube.delete_object(api, WIDGET, ns, "m")
    drive(controller, lambda: Resource.objects.get(uid=uid).deleted)


def test_keys_reach_the_real_workqueue_and_celery(api, widget_kind, ns, make_controller, redis_client, celery_queue):
    from reconcilers.engine import dispatch

    queue = dispatch.get_queue()
    controller = make_controller(enqueue=None, pump=None)  # dispatch.enqueue and dispatch.pump
    kube.create_object(api, WIDGET, widget("q", ns))
    kube.patch_object(api, WIDGET, ns, "q", {"spec": {"size": 2}})
    wanted = key(ns, "q")
    drive(controller, lambda: any(item.key == wanted for item in queue.snapshot().pending))
    drive(controller, lambda: controller.handoff.pending() == (0, 0))
    assert [item.key for item in queue.snapshot().pending].count(wanted) == 1  # two events, one queued key
    assert redis_client.llen(celery_queue) >= 1  # and the reconcile task went to this session's Celery queue
