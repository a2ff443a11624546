"""Deletion on record for every kind, end to end on kubesim, the real Redis, real Celery workers, the controller
process and the database: a kind without a finalizer (the built-in Memcached) gets one chained `Deleted`
transition when its object goes, also when it went while the controller was stopped (found missing from the
list when it starts: no live ghost row is left); an object re-created under the same name while the controller
was stopped is a second resource with its own chain; a replayed DELETED event, a re-list or a reconcile that
finds the object gone records nothing more; a kind with a finalizer keeps its own Terminating → Deleted.
`audit_verify` passes after each test (the `integration` fixture)."""

from __future__ import annotations

import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube, recording
from reconcilers.engine.controller import InformerEvent
from reconcilers.engine.controller.events import DELETED
from reconcilers.engine.controller.wiring import build_controller
from reconcilers.kinds.memcached import MEMCACHED, MemcachedReconciler
from reconcilers.models import Resource, Transition
from tests.fixtures.engines import wait_idle
from tests.reconcilers import testkinds

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def memcached(namespace, name):
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": 1}}


def chain(uid):
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq")
                .values_list("from_phase", "to_phase", "reason", "actor"))


def running(kapi, namespace, name):
    """Create a Memcached and wait until its Running is on record; its uid."""
    uid = kube.create_object(kapi, MEMCACHED, memcached(namespace, name))["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    return uid


def deleted_on_record(uid, timeout=20):
    wait_for(lambda: Resource.objects.filter(uid=uid, deleted=True, phase="Deleted").exists(), timeout=timeout,
             interval=0.1)


DELETION = [("Running", "Terminating", "ObjectDeleted", "unknown"),
            ("Terminating", "Deleted", "ObjectDeleted", "unknown")]


def test_deleting_a_kind_without_a_finalizer_records_one_chained_deleted_transition(integration, kapi, namespace):
    uid = running(kapi, namespace, "mc")
    kube.delete_object(kapi, MEMCACHED, namespace, "mc")
    deleted_on_record(uid)
    wait_idle(integration.workqueue(), timeout=30)
    rows = chain(uid)
    assert rows[-2:] == DELETION
    assert [r[1] for r in rows].count("Deleted") == 1
    last = Transition.objects.filter(resource_uid=uid).order_by("-seq").first()
    assert "last observed phase Running" in last.message and "generation 1" in last.message
    assert not Resource.objects.filter(key=MEMCACHED.request(namespace, "mc").key(), deleted=False).exists()


def test_a_replayed_deleted_event_a_relist_and_a_reconcile_finding_it_gone_record_nothing_more(
    integration, kapi, namespace
):
    uid = running(kapi, namespace, "mc")
    last = kube.get_object(kapi, MEMCACHED, namespace, "mc")
    kube.delete_object(kapi, MEMCACHED, namespace, "mc")
    deleted_on_record(uid)
    wait_idle(integration.workqueue(), timeout=30)
    before = chain(uid)

    # the controller's own code in this process, on the same database: the DELETED event handed to it again
    controller = build_controller(kapi, [MemcachedReconciler()], enqueue=lambda key: True, pump=lambda: 0)
    controller.handle(InformerEvent(DELETED, MEMCACHED, last, last))
    assert controller._write_mirror()
    # a sweep after a list (of its namespace: other tests' objects are not this test's) that does not have it,
    # and a reconcile whose GET answers 404
    assert recording.resource_mirror_sweep(MemcachedReconciler(), set(), namespace=namespace) == []
    recording.resource_mirror_gone(MEMCACHED.request(namespace, "mc").key())
    assert chain(uid) == before


def test_a_kind_with_a_finalizer_keeps_its_terminating_deleted_and_the_deleted_event_adds_nothing(
    integration, kapi, namespace
):
    obj = kube.create_object(kapi, testkinds.GADGET, {
        "apiVersion": testkinds.GADGET.api_version, "kind": "Gadget",
        "metadata": {"name": "g", "namespace": namespace}, "spec": {"mode": "ok"}})
    uid = obj["metadata"]["uid"]
    wait_for(lambda: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    kube.delete_object(kapi, testkinds.GADGET, namespace, "g")
    wait_for(lambda: kube.get_object(kapi, testkinds.GADGET, namespace, "g") is None, timeout=30, interval=0.1)
    wait_for(lambda: Resource.objects.filter(uid=uid, deleted=True).exists(), timeout=20, interval=0.1)
    wait_idle(integration.workqueue(), timeout=30)
    rows = chain(uid)
    assert [r[1] for r in rows].count("Deleted") == 1
    assert rows[-1][1:3] == ("Deleted", "Finalized")


def test_deleted_and_recreated_while_the_controller_was_stopped_both_are_on_record_and_no_ghost_is_left(
    integration, kapi, namespace
):
    gone_uid = running(kapi, namespace, "gone")
    old_uid = running(kapi, namespace, "again")
    wait_idle(integration.workqueue(), timeout=30)

    integration.controller.stop()  # SIGTERM: it releases its Lease
    try:
        kube.delete_object(kapi, MEMCACHED, namespace, "gone")
        kube.delete_object(kapi, MEMCACHED, namespace, "again")
        wait_for(lambda: kube.get_object(kapi, MEMCACHED, namespace, "again") is None, timeout=10)
        new_uid = kube.create_object(kapi, MEMCACHED, memcached(namespace, "again"))["metadata"]["uid"]
        time.sleep(0.5)  # nobody watches: the mirror still has both old rows live
        assert Resource.objects.filter(uid__in=[gone_uid, old_uid], deleted=False).count() == 2
    finally:
        integration.controller.start()
        integration.controller.wait_ready()

    deleted_on_record(gone_uid)
    deleted_on_record(old_uid)
    wait_for(lambda: Resource.objects.filter(uid=new_uid, phase="Running").exists(), timeout=30, interval=0.1)
    wait_idle(integration.workqueue(), timeout=30)

    for uid in (gone_uid, old_uid):
        rows = chain(uid)
        assert rows[-2:] == DELETION and [r[1] for r in rows].count("Deleted") == 1
        assert "not in the cluster's list" in Transition.objects.filter(resource_uid=uid).order_by("-seq")[0].message
    # the re-created object is a second resource with its own chain; the first stays, recorded deleted
    assert chain(new_uid)[0][:2] == ("", "Pending")
    assert "Deleted" not in [r[1] for r in chain(new_uid)]
    key = MEMCACHED.request(namespace, "again").key()
    assert sorted(Resource.objects.filter(key=key).values_list("uid", "deleted")) == sorted(
        [(old_uid, True), (new_uid, False)])
    assert not Resource.objects.filter(key=MEMCACHED.request(namespace, "gone").key(), deleted=False).exists()
