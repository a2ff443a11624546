"""End to end on kubesim, the real Redis, real Celery workers, the controller process and the database: the
built-in reconcilers converge, fail with a reason, go back through Pending on a spec change, clean up on
deletion; every transition is recorded once, and the audit trail verifies."""

from __future__ import annotations

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED
from reconcilers.kinds.tenant import NAMESPACE, TENANT
from reconcilers.models import ReconcileRun, Resource, Transition

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def memcached(namespace, name, size=1, **spec):
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": size, **spec}}


def phases(uid):
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))


def messages(uid):
    """Each transition's time, actor, reason and message (which path recorded it)."""
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq")
                .values_list("created_at", "actor", "reason", "message"))


def phase_of(api, kind, namespace, name):
    obj = kube.get_object(api, kind, namespace, name)
    return ((obj or {}).get("status") or {}).get("phase")


def recorded(uid, phase):
    """The database recorded `phase` for the object (the status is written just before the recording)."""
    return Resource.objects.filter(uid=uid, phase=phase).exists()


def test_fifty_memcacheds_converge_to_running_each_recording_exactly_pending_then_running(integration, kapi,
                                                                                            namespace):
    uids = [kube.create_object(kapi, MEMCACHED, memcached(namespace, f"mc-{i:02d}"))["metadata"]["uid"]
            for i in range(50)]

    def all_running():
        items = kube.list_objects(kapi, MEMCACHED, namespace).items
        return len(items) == 50 and all((o.get("status") or {}).get("phase") == "Running" for o in items) and \
            Resource.objects.filter(uid__in=uids, phase="Running").count() == 50

    wait_for(all_running, timeout=90, interval=0.3)
    for uid in uids:
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], uid
    items = kube.list_objects(kapi, MEMCACHED, namespace).items
    for obj in items:
        status = obj["status"]
        assert status["readyReplicas"] == 1 and len(status["nodes"]) == 1
        assert status["observedGeneration"] == obj["metadata"]["generation"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
    assert not ReconcileRun.objects.filter(key__contains=f"/{namespace}/", result="error").exists()


def test_a_broken_image_reaches_failed_with_its_reason(integration, kapi, namespace):
    uid = kube.create_object(kapi, MEMCACHED, memcached(namespace, "broken", image="memcached:broken",
                                                         progressDeadlineSeconds=2))["metadata"]["uid"]
    try:
        wait_for(lambda: recorded(uid, "Failed"), timeout=45, interval=0.2)
    except AssertionError as exc:  # say where it stands: the record, the runs, the live status, the queue
        from reconcilers.engine import dispatch

        runs = list(ReconcileRun.objects.filter(resource__uid=uid).order_by("started_at")
                    .values_list("started_at", "result", "error_class", "duration_seconds"))
        snap = dispatch.get_queue().snapshot()
        key = MEMCACHED.request(namespace, "broken").key()
        where = {"pending": [p for p in snap.pending if key in str(p)],
                 "processing": [p for p in snap.processing if key in str(p)],
                 "backing_off": [p for p in snap.backing_off if key in str(p)]}
        raise AssertionError(f"{exc}; record {Resource.objects.filter(uid=uid).values('phase', 'reason').first()}; "
                             f"transitions {phases(uid)}; messages {messages(uid)}; runs {runs}; live status "
                             f"{kube.get_object(kapi, MEMCACHED, namespace, 'broken').get('status')}; queue {where}"
                             ) from exc
    status = kube.get_object(kapi, MEMCACHED, namespace, "broken")["status"]
    assert status["phase"] == "Failed" and status["reason"] == "ProgressDeadlineExceeded"
    assert "ErrImagePull" in status["message"] or "ImagePullBackOff" in status["message"]
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "ProgressDeadlineExceeded"
    assert phases(uid) == [("", "Pending"), ("Pending", "Failed")]
    row = Transition.objects.get(resource_uid=uid, to_phase="Failed")
    assert row.reason == "ProgressDeadlineExceeded"


def test_an_invalid_spec_is_failed_at_once_without_children(integration, kapi, namespace):
    uid = kube.create_object(kapi, MEMCACHED, memcached(namespace, "invalid", image="Memcached:Latest"))[
        "metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Failed"), timeout=20, interval=0.2)
    assert kube.get_object(kapi, MEMCACHED, namespace, "invalid")["status"]["reason"] == "InvalidSpec"
    assert kube.get_object(kapi, DEPLOYMENT, namespace, "invalid") is None
    run = ReconcileRun.objects.filter(resource__uid=uid).order_by("id").first()
    assert (run.result, run.error_class) == ("error", "PermanentError")


def test_a_spec_change_records_running_pending_running(integration, kapi, namespace):
    uid = kube.create_object(kapi, MEMCACHED, memcached(namespace, "grow", size=1))["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.2)
    kube.patch_object(kapi, MEMCACHED, namespace, "grow", {"spec": {"size": 2}})

    def running_two():
        obj = kube.get_object(kapi, MEMCACHED, namespace, "grow")
        status = obj.get("status") or {}
        return status.get("observedGeneration") == 2 and status.get("readyReplicas") == 2 and \
            len(phases(uid)) >= 4 and recorded(uid, "Running")

    wait_for(running_two, timeout=30, interval=0.2)
    assert phases(uid) == [("", "Pending"), ("Pending", "Running"), ("Running", "Pending"), ("Pending", "Running")]
    spec_change = Transition.objects.get(resource_uid=uid, seq=3)
    assert spec_change.reason == "SpecChanged" and spec_change.generation == 2
    assert kube.get_object(kapi, DEPLOYMENT, namespace, "grow")["spec"]["replicas"] == 2


def test_a_tenant_is_provisioned_and_its_deletion_records_terminating_deleted_and_leaves_no_namespace(
        integration, kapi):
    name = f"acme-{kapi.configuration.host[-5:].replace(':', '')}"
    tenant = {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": name},
              "spec": {"admins": ["alice"], "quota": {"cpu": "2", "pods": 10}}}
    uid = kube.create_object(kapi, TENANT, tenant)["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.2)
    ns = kube.get_object(kapi, NAMESPACE, None, f"tenant-{name}")
    assert ns is not None and ns["metadata"]["ownerReferences"][0]["uid"] == uid

    kube.delete_object(kapi, TENANT, None, name)
    wait_for(lambda: kube.get_object(kapi, TENANT, None, name) is None, timeout=30, interval=0.2)
    assert phases(uid) == [("", "Pending"), ("Pending", "Running"), ("Running", "Terminating"),
                           ("Terminating", "Deleted")]
    assert kube.get_object(kapi, NAMESPACE, None, f"tenant-{name}") is None
    wait_for(lambda: Resource.objects.filter(uid=uid, deleted=True).exists(), timeout=10, interval=0.2)


def test_a_tenant_with_an_invalid_quota_fails_and_creates_nothing(integration, kapi):
    name = f"bad-{kapi.configuration.host[-5:].replace(':', '')}"
    tenant = {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": name},
              "spec": {"admins": ["alice"], "quota": {"cpu": "lots"}}}
    uid = kube.create_object(kapi, TENANT, tenant)["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Failed"), timeout=20, interval=0.2)
    assert kube.get_object(kapi, TENANT, None, name)["status"]["reason"] == "InvalidQuota"
    assert kube.get_object(kapi, NAMESPACE, None, f"tenant-{name}") is None
    kube.delete_object(kapi, TENANT, None, name)
    wait_for(lambda: kube.get_object(kapi, TENANT, None, name) is None, timeout=30, interval=0.2)
    assert phases(uid)[-2:] == [("Failed", "Terminating"), ("Terminating", "Deleted")]
