"""End to end, the engine's guarantees with real worker processes: one reconcile per key at a time across
workers, coalescing of an event burst, a status-only change enqueues nothing, a worker SIGKILLed
mid-reconcile loses and doubles nothing, a 409 on the status write is retried, and `manage.py reconcile
--wait` follows a manual request to the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kubesim.testing import wait_for
from opsconsole.celery import app
from reconcilers.engine import dispatch, kube
from reconcilers.kinds.memcached import MEMCACHED
from reconcilers.models import ReconcileRequest, ReconcileRun, RequestState, Resource, Transition
from tests.fixtures.cluster import ROOT
from tests.fixtures.engines import INTEGRATION_RECONCILERS
from tests.reconcilers.testkinds import GADGET, gadget, overlaps, trace
from tests.support.status_patch import patch_status
from tests.support.workers import test_database_url as database_url

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def phases(uid):
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))


def recorded(uid, phase):
    return Resource.objects.filter(uid=uid, phase=phase).exists()


def create(api, namespace, name, **spec):
    obj = kube.create_object(api, GADGET, gadget(namespace, name, **spec))
    return GADGET.request(namespace, name).key(), obj["metadata"]["uid"]


def test_two_workers_never_reconcile_one_key_at_the_same_time(integration, kapi, namespace):
    gadgets = [create(kapi, namespace, f"g{i}", mode="slow", sleepSeconds=0.15) for i in range(4)]
    for _, uid in gadgets:
        wait_for(lambda uid=uid: recorded(uid, "Running"), timeout=30, interval=0.1)
    # tasks straight to the broker, bypassing the workqueue's coalescing: both workers get tasks for every key
    for _ in range(6):
        for key, _ in gadgets:
            app.send_task("reconcilers.reconcile", args=[key], queue=integration.queue_name)
    marks_of = {}
    for _, uid in gadgets:
        wait_for(lambda uid=uid: len(trace(uid)) >= 4, timeout=30, interval=0.1)
    wait_for(lambda: dispatch.get_queue().snapshot().processing_count == 0, timeout=30, interval=0.1)
    for _, uid in gadgets:
        marks_of[uid] = trace(uid)
        assert overlaps(marks_of[uid]) == 0, marks_of[uid]
    everything = sorted((m for marks in marks_of.values() for m in marks), key=lambda m: m[1])
    assert overlaps(everything) > 0  # reconciles of different keys did run in parallel, on both workers
    assert len({pid for marks in marks_of.values() for _, _, pid in marks}) == 2


def test_a_burst_of_100_events_for_one_key_coalesces_into_a_handful_of_reconciles(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "busy", mode="slow", sleepSeconds=0.2, n=0)
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.1)
    before = ReconcileRun.objects.filter(key=key).count()
    for n in range(1, 101):  # 100 spec changes: 100 watch events that each ask for a reconcile
        kube.patch_object(kapi, GADGET, namespace, "busy", {"spec": {"n": n}})

    def caught_up():
        status = kube.get_object(kapi, GADGET, namespace, "busy").get("status") or {}
        return status.get("observedGeneration") == 101

    wait_for(caught_up, timeout=30, interval=0.1)
    wait_for(lambda: dispatch.get_queue().snapshot().processing_count == 0, timeout=30, interval=0.1)
    reconciles = ReconcileRun.objects.filter(key=key).count() - before
    assert 1 <= reconciles <= 12, reconciles
    assert overlaps(trace(uid)) == 0


def test_a_status_only_change_enqueues_nothing(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "calm", mode="ok")
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.1)
    time.sleep(0.5)
    before = ReconcileRun.objects.filter(key=key).count()
    adds = dispatch.get_queue().snapshot()
    for i in range(5):
        patch_status(kapi, GADGET, namespace, "calm", {"status": {"note": f"status only {i}"}})
    time.sleep(1.5)  # the controller would have enqueued well within this
    assert ReconcileRun.objects.filter(key=key).count() == before
    assert dispatch.get_queue().snapshot().depth == adds.depth == 0
    kube.patch_object(kapi, GADGET, namespace, "calm", {"spec": {"mode": "ok", "touch": 1}})  # but a spec change does
    wait_for(lambda: ReconcileRun.objects.filter(key=key).count() > before, timeout=10, interval=0.1)


def test_a_worker_killed_mid_reconcile_the_key_is_reconciled_again_and_nothing_is_lost_or_doubled(
        integration, kapi, namespace):
    key, uid = create(kapi, namespace, "victim", mode="pending", requeueAfter=3600)
    wait_for(lambda: recorded(uid, "Pending"), timeout=30, interval=0.1)
    wait_for(lambda: dispatch.get_queue().snapshot().processing_count == 0, timeout=30, interval=0.05)
    base = len(trace(uid))
    runs_before = ReconcileRun.objects.filter(key=key).count()
    kube.patch_object(kapi, GADGET, namespace, "victim", {"spec": {"mode": "slow", "sleepSeconds": 1.5}})
    started = wait_for(lambda: [m for m in trace(uid)[base:] if m[0] == "start"], timeout=30, interval=0.02)
    pid = started[0][2]
    (victim,) = [w for w in integration.workers if pid in w.children()]
    victim.kill()  # SIGKILL, main process and pool child, in the middle of the reconcile
    killed_at = time.time()
    try:
        wait_for(lambda: recorded(uid, "Running"), timeout=40, interval=0.1)
        marks = trace(uid)[base:]
        assert [m[0] for m in marks] == ["start", "start", "end"]  # the first never ended
        assert marks[1][2] != pid and marks[1][1] >= killed_at
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")]
        assert kube.get_object(kapi, GADGET, namespace, "victim")["status"]["phase"] == "Running"
        after = list(ReconcileRun.objects.filter(key=key).order_by("id").values_list("result", flat=True))
        assert after[runs_before:] == ["success"]  # the killed run left no row; the rerun did
    finally:
        integration.replace(victim)


def test_a_409_on_the_status_write_is_retried_and_succeeds(integration, kapi, namespace):
    key, uid = create(kapi, namespace, "contested", mode="conflict")
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.1)
    obj = kube.get_object(kapi, GADGET, namespace, "contested")
    assert obj["status"]["phase"] == "Running"
    assert "test.opsconsole.io/touched" in obj["metadata"]["annotations"]  # changed under the run's feet
    assert list(ReconcileRun.objects.filter(key=key).values_list("result", flat=True))[0] == "success"
    assert not ReconcileRun.objects.filter(key=key, result="error").exists()
    wait_for(lambda: f"{key}: status write conflict (409)" in integration.worker_logs(), timeout=10)


def test_manage_py_reconcile_wait_handles_a_request_end_to_end(integration, kapi, namespace):
    kube.create_object(kapi, MEMCACHED, {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                                         "metadata": {"name": "manual", "namespace": namespace}, "spec": {"size": 1}})
    uid = kube.get_object(kapi, MEMCACHED, namespace, "manual")["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Running"), timeout=30, interval=0.1)
    env = {**os.environ, **integration.env, "DATABASE_URL": database_url(),
           "OPSCONSOLE_CELERY_QUEUE": integration.queue_name,
           "OPSCONSOLE_RECONCILERS": ",".join(INTEGRATION_RECONCILERS)}
    proc = subprocess.run(
        [sys.executable, "manage.py", "reconcile", "Memcached", f"{namespace}/manual",
         "--reason", "cache looks stale", "--actor", "user:alice", "--wait", "--timeout", "30", "--interval", "0.05"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    request = ReconcileRequest.objects.get(key=MEMCACHED.request(namespace, "manual").key())
    assert (request.state, request.actor, request.reason) == (RequestState.SUCCEEDED, "user:alice",
                                                               "cache looks stale")
    assert request.requested_at <= request.picked_up_at <= request.finished_at
    assert request.run is not None and request.run.request_id == request.pk
    lines = [line.split()[0] for line in proc.stdout.splitlines()]
    assert lines[:3] == ["requested", "picked", "succeeded"], proc.stdout
    obj = kube.get_object(kapi, MEMCACHED, namespace, "manual")
    assert obj["metadata"]["annotations"]["opsconsole.io/reconcile-requested-at"] == request.token
    assert obj["status"]["lastHandledReconcileAt"] == request.token
    assert f"lastHandledReconcileAt {request.token}" in proc.stdout
    assert phases(uid) == [("", "Pending"), ("Pending", "Running")]  # a manual reconcile changes no phase
