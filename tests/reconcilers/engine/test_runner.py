"""runner.run(key) in this process against kubesim, the real Redis workqueue and the database: the lease,
the status write (kstatus, observedGeneration, 409 retried), the recording, the error classes, deletion with
a finalizer, the manual-request token and the queue bookkeeping."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from reconcilers.core.meta import FIELD_MANAGER, RECONCILE_REQUESTED_AT
from reconcilers.core.types import Request
from reconcilers.engine import claimed, dispatch, drain, kube, provenance, runner, step
from reconcilers.models import ReconcileRequest, ReconcileRun, RequestState, Resource, Transition
from tests.reconcilers.testkinds import GADGET, trace

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

PLAIN = ["tests.reconcilers.testkinds.PlainGadgetReconciler"]


def live(kapi, key):
    req = Request.from_key(key)
    return kube.get_object(kapi, GADGET, req.namespace, req.name)


def phases(uid):
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))


def runs(key):
    return list(ReconcileRun.objects.filter(key=key).order_by("id"))


def test_a_first_reconcile_writes_status_and_records_pending_then_running(make, kapi, workqueue):
    key, obj = make(mode="ok")
    assert workqueue.add(key)
    assert runner.run(key) == "success"
    status = live(kapi, key)["status"]
    assert status["phase"] == "Running" and status["reason"] == "Working"
    assert status["observedGeneration"] == 1 and status["mode"] == "ok"
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Ready"]["status"] == "True" and conds["Reconciling"]["status"] == "False"
    assert conds["Stalled"]["status"] == "False" and conds["Working"]["status"] == "True"
    assert all(c["observedGeneration"] == 1 and c["lastTransitionTime"] for c in conds.values())
    assert phases(obj["metadata"]["uid"]) == [("", "Pending"), ("Pending", "Running")]
    (run,) = runs(key)
    assert run.result == "success" and run.attempt == 1 and run.worker
    assert run.operator_version == "module tests.reconcilers.testkinds"  # the Gadget is no distribution's code
    mirror = Resource.objects.get(uid=obj["metadata"]["uid"])
    assert mirror.phase == "Running" and mirror.observed_generation == 1
    assert FINALIZER_OF(live(kapi, key))
    # one Event per transition, about the object
    events = [e for e in kube.list_objects(kapi, kube.kind_for(kapi, "v1", "Event"), obj["metadata"]["namespace"]).items
              if e["involvedObject"]["uid"] == obj["metadata"]["uid"]]
    assert sorted(e["message"].split(":")[0] for e in events) == ["(new) -> Pending", "Pending -> Running"]
    # lease released, nothing left to do
    snap = workqueue.snapshot()
    assert snap.processing_count == 0 and snap.depth == 0 and workqueue.sent.keys == []


def FINALIZER_OF(obj):
    return "test.opsconsole.io/cleanup" in (obj["metadata"].get("finalizers") or [])


def test_a_rerun_with_nothing_changed_writes_nothing_and_records_no_transition(make, kapi):
    key, obj = make(mode="ok")
    runner.run(key)
    rv = live(kapi, key)["metadata"]["resourceVersion"]
    assert runner.run(key) == "success"
    assert live(kapi, key)["metadata"]["resourceVersion"] == rv
    assert len(phases(obj["metadata"]["uid"])) == 2 and len(runs(key)) == 2


def test_a_key_held_by_another_worker_is_skipped_and_stays_dirty(make, workqueue):
    key, _ = make(mode="ok")
    workqueue.add(key)
    assert workqueue.claim(key, "someone-else") is not None
    workqueue.add(key)  # an event meanwhile
    assert runner.run(key) == runner.SKIPPED
    assert runs(key) == []
    assert workqueue.done(key, "someone-else") is True  # the holder's done() re-queues it


def test_requeue_after_puts_the_key_in_the_delayed_set(make, kapi, workqueue):
    key, obj = make(mode="pending", requeueAfter=30)
    assert runner.run(key) == "requeue_after"
    assert live(kapi, key)["status"]["phase"] == "Pending"
    conds = {c["type"]: c["status"] for c in live(kapi, key)["status"]["conditions"]}
    assert conds == {"Ready": "False", "Reconciling": "True", "Stalled": "False"}
    (delayed,) = workqueue.snapshot().backing_off
    assert delayed.key == key and delayed.failures == 0


def test_a_permanent_error_marks_it_failed_with_the_reason_and_does_not_retry(make, kapi, workqueue):
    key, obj = make(mode="permanent")
    assert runner.run(key) == "error"
    status = live(kapi, key)["status"]
    assert status["phase"] == "Failed" and status["reason"] == "GadgetBroken"
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True" and stalled["reason"] == "GadgetBroken"
    assert phases(obj["metadata"]["uid"]) == [("", "Pending"), ("Pending", "Failed")]
    (run,) = runs(key)
    assert run.error_class == "PermanentError" and "broken for good" in run.error_message
    assert workqueue.snapshot().backing_off == [] and workqueue.failures(key) == 0


def test_a_temporary_error_retries_after_its_delay_and_marks_nothing_failed(make, kapi, workqueue):
    key, obj = make(mode="temporary", delay=60)
    assert runner.run(key) == "error"
    assert "phase" not in (live(kapi, key).get("status") or {})
    (run,) = runs(key)
    assert run.error_class == "TemporaryError" and "GadgetBusy" in run.error_message
    (delayed,) = workqueue.snapshot().backing_off
    assert delayed.key == key and 55 < delayed.next_retry - workqueue.now() <= 60


def test_an_unexpected_exception_backs_off_exponentially_and_is_recorded(make, workqueue):
    key, _ = make(mode="crash")
    assert runner.run(key) == "error"
    assert runner.run(key) == "error"
    first, second = runs(key)
    assert (first.error_class, first.attempt, second.attempt) == ("RuntimeError", 1, 2)
    assert "exploded" in first.error_message
    assert workqueue.failures(key) == 2


def test_success_after_failures_resets_the_backoff(make, kapi, workqueue):
    key, _ = make(mode="crash")
    runner.run(key)
    kube.patch_object(kapi, GADGET, Request.from_key(key).namespace, "g", {"spec": {"mode": "ok"}})
    assert runner.run(key) == "success"
    assert workqueue.failures(key) == 0


def test_a_409_on_the_status_write_is_re_read_and_retried(make, kapi, monkeypatch):
    key, obj = make(mode="conflict")
    conflicts = []
    real = step.reconcile_step

    def spy(*args, **kwargs):
        outcome = real(*args, **kwargs)
        conflicts.append(outcome.status_conflicts)
        return outcome

    monkeypatch.setattr(step, "reconcile_step", spy)
    assert runner.run(key) == "success"
    assert conflicts == [1]
    after = live(kapi, key)
    assert after["status"]["phase"] == "Running"
    assert "test.opsconsole.io/touched" in after["metadata"]["annotations"]  # the concurrent change survived
    assert [r.result for r in runs(key)] == ["success"]


def test_a_failed_get_of_the_object_is_a_recorded_error_run_and_backs_off(make, kapi, workqueue, monkeypatch):
    key, obj = make(mode="ok")
    runner.run(key)

    def refuse(*args, **kwargs):
        raise kube.ApiException(status=503, reason="Service Unavailable")

    monkeypatch.setattr(kube, "get_object", refuse)
    assert runner.run(key) == "error"
    first, failed = runs(key)
    assert (failed.result, failed.error_class, failed.attempt) == ("error", "ApiError", 1)
    assert "GET failed" in failed.error_message and "503" in failed.error_message
    assert failed.resource_id == first.resource_id is not None  # linked to the object's mirror
    assert workqueue.failures(key) == 1 and [i.key for i in workqueue.snapshot().backing_off] == [key]
    assert len(phases(obj["metadata"]["uid"])) == 2  # no transition from a run that saw nothing


def test_a_spec_change_sets_the_new_observed_generation(make, kapi):
    key, obj = make(mode="ok")
    runner.run(key)
    kube.patch_object(kapi, GADGET, obj["metadata"]["namespace"], "g", {"spec": {"mode": "ok", "x": 1}})
    runner.run(key)
    after = live(kapi, key)
    assert after["metadata"]["generation"] == 2 and after["status"]["observedGeneration"] == 2


def test_the_manual_request_token_is_echoed_and_its_request_finished(make, kapi):
    key, obj = make(mode="ok")
    runner.run(key)
    ns = obj["metadata"]["namespace"]
    request = ReconcileRequest.objects.create(key=key, token="2030-01-01T00:00:00.000001Z", actor="user:alice",
                                              reason="test")
    kube.patch_object(kapi, GADGET, ns, "g", {"metadata": {"annotations": {RECONCILE_REQUESTED_AT: request.token}}})
    assert runner.run(key) == "success"
    assert live(kapi, key)["status"]["lastHandledReconcileAt"] == request.token
    request.refresh_from_db()
    assert request.state == RequestState.SUCCEEDED and request.picked_up_at and request.run_id
    # handled once: the next run does not count it again
    runner.run(key)
    assert ReconcileRun.objects.filter(request=request).count() == 1


def test_deletion_records_terminating_then_deleted_and_removes_the_finalizer(make, kapi, workqueue):
    key, obj = make(mode="ok", cleanupSteps=2)
    runner.run(key)
    kube.delete_object(kapi, GADGET, obj["metadata"]["namespace"], "g")
    workqueue.add(key)
    assert runner.run(key) == "requeue"  # → Terminating, then again at once
    assert live(kapi, key)["status"]["phase"] == "Terminating"
    assert workqueue.sent.keys == [key]
    workqueue.sent.keys.clear()
    assert runner.run(key) == "requeue_after"  # cleanup step 1 of 2
    assert live(kapi, key) is not None
    assert runner.run(key) == "success"  # cleanup done → Deleted, finalizer removed
    assert live(kapi, key) is None
    uid = obj["metadata"]["uid"]
    assert phases(uid) == [("", "Pending"), ("Pending", "Running"), ("Running", "Terminating"),
                           ("Terminating", "Deleted")]
    assert runner.run(key) == "success"  # gone: the mirror says so, nothing else recorded
    assert Resource.objects.get(uid=uid).deleted
    assert len(phases(uid)) == 4


def test_a_phase_written_by_a_run_that_died_before_recording_is_recorded_first(make, kapi, workqueue):
    key, obj = make(mode="ok")
    runner.run(key)
    uid = obj["metadata"]["uid"]
    # a run wrote Failed to the object and died before its commit
    cur = live(kapi, key)
    cur["status"] = {**cur["status"], "phase": "Failed", "reason": "Died"}
    cur["metadata"].pop("managedFields", None)
    written = kube.request_json(kapi, "PUT", kube.object_path(GADGET, cur["metadata"]["namespace"], "g", "status"),
                                body=cur, query={"fieldManager": FIELD_MANAGER})
    # what a run notes right after its status write returns (the proof that it was a run of ours)
    provenance.note_written(workqueue.redis, uid, written["metadata"]["resourceVersion"], "Failed")
    assert runner.run(key) == "requeue"
    assert phases(uid)[-1] == ("Running", "Failed")
    assert runner.run(key) == "success"
    assert phases(uid)[-2:] == [("Running", "Failed"), ("Failed", "Running")]


def test_the_lease_is_renewed_during_a_long_reconcile(make, workqueue, monkeypatch):
    key, obj = make(mode="slow", sleepSeconds=2.5)  # lease is 3 s, renewed every second
    renewals = []
    real = workqueue.renew

    def spy(k, owner):
        renewals.append(k)
        return real(k, owner)

    monkeypatch.setattr(workqueue, "renew", spy)
    assert runner.run(key) == "success"
    assert len(renewals) >= 2
    marks = trace(obj["metadata"]["uid"])
    assert [m[0] for m in marks] == ["start", "end"]


def test_an_unregistered_kind_is_dropped(make, reconcilers):
    key, _ = make(mode="ok")
    reconcilers(["reconcilers.kinds.memcached.MemcachedReconciler"])
    assert runner.run(key) == "error"
    assert runs(key) == []


def test_a_kind_without_a_finalizer_is_just_marked_deleted_when_gone(make, kapi, reconcilers):
    reconcilers(PLAIN)
    key, obj = make(mode="ok")
    runner.run(key)
    assert not FINALIZER_OF(live(kapi, key))
    kube.delete_object(kapi, GADGET, obj["metadata"]["namespace"], "g")
    assert runner.run(key) == "success"
    assert Resource.objects.get(uid=obj["metadata"]["uid"]).deleted


@pytest.fixture
def capped_queue(workqueue, settings):
    """The test's workqueue with at most one key sent and not yet claimed."""
    settings.OPSCONSOLE_WORKQUEUE_MAX_SENT = 1
    dispatch._queues.clear()  # the same queue (name, Redis keys), made again with the cap
    queue = dispatch.get_queue()
    queue.sent = workqueue.sent
    return queue


def test_a_task_runs_the_keys_held_ready_after_its_own(make, capped_queue):
    made = [make(name=f"g{i}", mode="ok") for i in range(3)]
    sent = [key for key, _ in made if capped_queue.add(key)]
    assert sent == [made[0][0]]  # the other two wait ready: no task sent for them
    assert runner.run(sent[0], drain=True) == "success"
    for key, obj in made:
        assert phases(obj["metadata"]["uid"]) == [("", "Pending"), ("Pending", "Running")]
        assert [r.result for r in runs(key)] == ["success"]
    assert capped_queue.snapshot().depth == 0 and capped_queue.sent.keys == []


def test_a_drain_with_nothing_left_lingers_and_runs_a_key_that_comes_meanwhile_without_a_message(make, workqueue,
                                                                                                 settings):
    """OPSCONSOLE_DRAIN_LINGER_SECONDS: the task waits idle for the next key; a key queued meanwhile is held for it
    (nothing sent) and run in the same task; with nothing more, it ends after the linger."""
    settings.OPSCONSOLE_DRAIN_LINGER_SECONDS = 0.5
    first, later = make(name="l1", mode="ok"), make(name="l2", mode="ok")
    assert workqueue.add(first[0]) is True
    workqueue.sent.keys.clear()
    threading.Timer(0.2, lambda: workqueue.add(later[0])).start()
    started = time.monotonic()
    assert runner.run(first[0], drain=True) == "success"
    assert 0.2 + 0.5 <= time.monotonic() - started < 5  # ran the later key, then lingered 0.5 s more
    assert [r.result for r in runs(later[0])] == ["success"]
    assert workqueue.sent.keys == []  # no Celery message for the later key
    assert workqueue.snapshot().depth == 0 and workqueue.snapshot().processing_count == 0


def test_a_drain_does_not_linger_while_its_worker_node_s_other_processes_linger_as_many_as_allowed(
        make, workqueue, settings, monkeypatch):
    """`linger_slots`: a node of two processes lets one linger; the other's task ends when no key waits, so the
    node has a process free for a task it is sent. A node of one process never lingers."""
    settings.OPSCONSOLE_DRAIN_LINGER_SECONDS = 5
    monkeypatch.setattr(drain, "_linger_node", None)
    runner.linger_slots("node-a", 2)
    workqueue._run("linger", "node-a|other", "30", "node-a|", "1")  # the node's other process lingers
    (first, _), (second, _) = make(name="s1", mode="ok"), make(name="s2", mode="ok")
    started = time.monotonic()
    assert runner.run(first, drain=True) == "success"
    assert time.monotonic() - started < 2.5  # did not linger 5 s
    workqueue._run("unlinger_next", "node-a|other", "", "")
    runner.linger_slots("node-a", 1)
    started = time.monotonic()
    assert runner.run(second, drain=True) == "success"
    assert time.monotonic() - started < 2.5
    assert workqueue.redis.zcard(workqueue.keys[10]) == 0  # nobody ever registered


def test_a_key_that_became_dirty_during_its_run_is_run_again_by_the_same_task_without_a_message(make, kapi,
                                                                                                 workqueue):
    key, obj = make(mode="ok", cleanupSteps=2)
    runner.run(key)
    kube.delete_object(kapi, GADGET, obj["metadata"]["namespace"], "g")
    workqueue.add(key)
    workqueue.sent.keys.clear()
    assert runner.run(key, drain=True) == "requeue"  # → Terminating, queued again at once: the drain runs it
    assert [r.result for r in runs(key)][-2:] == ["requeue", "requeue_after"]  # cleanup step 1 of 2, same task
    assert workqueue.sent.keys == []  # no Celery message for the second run
    assert workqueue.snapshot().depth == 0 and workqueue.snapshot().delayed_count == 1


def test_a_drain_stops_at_its_limit_and_sends_what_is_still_ready(make, capped_queue, settings):
    settings.OPSCONSOLE_DRAIN_KEYS = 1
    made = [make(name=f"h{i}", mode="ok") for i in range(3)]
    for key, _ in made:
        capped_queue.add(key)
    assert runner.run(made[0][0], drain=True) == "success"
    assert [len(runs(key)) for key, _ in made] == [1, 1, 0]  # its own key, then one drained
    assert capped_queue.sent.keys == [made[2][0]]  # the third is sent, not stranded
    assert runner.run(made[2][0], only_if_queued=True) == "success"  # that task's run
    assert runner.run(made[1][0], only_if_queued=True) == runner.SKIPPED  # done already: nothing queued


@pytest.mark.django_db(transaction=True)
def test_a_drain_runs_waiting_keys_on_several_threads_each_once(make, capped_queue, settings, monkeypatch):
    """With OPSCONSOLE_DRAIN_THREADS > 1 the keys a task drains run at once on the process's drain threads (each
    claimed when a thread is free), every key exactly once, all recorded."""
    settings.OPSCONSOLE_DRAIN_THREADS = 3
    # the drain threads close their connections as they finish (else the test database cannot be dropped)
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    made = [make(name=f"s{i}", mode="slow", sleepSeconds=0.3) for i in range(5)]
    running, most, lock = set(), [0], threading.Lock()
    real = claimed.execute_claimed

    def spy(queue, claim, **kwargs):
        with lock:
            running.add(claim.key)
            most[0] = max(most[0], len(running))
        try:
            return real(queue, claim, **kwargs)
        finally:
            with lock:
                running.discard(claim.key)

    monkeypatch.setattr(claimed, "execute_claimed", spy)
    for key, _ in made:
        capped_queue.add(key)
    assert runner.drain_ready(capped_queue) == 5
    assert most[0] == 3  # three at once: the task's thread and two drain threads
    for key, obj in made:
        assert [r.result for r in runs(key)] == ["success"]
        assert phases(obj["metadata"]["uid"]) == [("", "Pending"), ("Pending", "Running")]
    assert capped_queue.snapshot().depth == 0 and capped_queue.snapshot().processing_count == 0
