"""MemcachedReconciler: the children it applies and the phase it derives from the rollout."""

from __future__ import annotations

import pytest

from opsconsole.testing import FakeContext
from reconcilers.core.types import PermanentError
from reconcilers.kinds import memcached
from reconcilers.kinds.memcached import DEGRADED, FAILED, PENDING, RUNNING, MemcachedReconciler

T0 = 1_800_000_000.0


def cr(size=2, *, image="memcached:1.6", port=11211, deadline=30, generation=1, status=None):
    return {
        "apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": "mc", "namespace": "apps", "uid": "u-1", "generation": generation},
        "spec": {"size": size, "image": image, "port": port, "progressDeadlineSeconds": deadline},
        "status": status or {},
    }


@pytest.fixture
def clock(monkeypatch):
    now = {"t": T0}
    monkeypatch.setattr(memcached, "_now", lambda: now["t"])
    return now


def roll_out(ctx, ready, *, size=2, generation=1):
    dep = ctx.find("apps/v1", "Deployment", "apps", "mc")
    dep["metadata"]["generation"] = generation
    dep["status"] = {"observedGeneration": generation, "replicas": size, "updatedReplicas": size,
                     "readyReplicas": ready, "availableReplicas": ready}
    for i in range(size):
        ctx.put({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"mc-{i}", "namespace": "apps", "labels": memcached.selector_labels("mc")},
                 "status": {}})


def test_a_new_memcached_gets_a_deployment_and_a_service_and_is_pending(clock):
    ctx = FakeContext(cr(3, port=11311))
    result = MemcachedReconciler().reconcile(ctx, ctx.obj)
    dep = ctx.find("apps/v1", "Deployment", "apps", "mc")
    svc = ctx.find("v1", "Service", "apps", "mc")
    assert dep["spec"]["replicas"] == 3
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "memcached:1.6"
    assert container["ports"][0]["containerPort"] == 11311
    assert dep["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]
    assert svc["spec"]["ports"][0]["port"] == 11311
    assert result.phase == PENDING and result.reason == "RollingOut"
    assert result.status["readyReplicas"] == 0
    assert result.requeue_after is not None and result.requeue_after <= 30


def test_it_is_running_when_every_replica_is_ready_and_lists_its_pods(clock):
    ctx = FakeContext(cr(2, status={"phase": PENDING, "observedGeneration": 1}))
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    roll_out(ctx, ready=2)
    result = rec.reconcile(ctx, ctx.obj)
    assert result.phase == RUNNING
    assert result.status["readyReplicas"] == 2
    assert result.status["nodes"] == ["mc-0", "mc-1"]
    assert result.requeue_after is None
    assert [c.status for c in result.conditions if c.type == "Available"] == ["True"]


def test_a_deployment_that_has_not_observed_its_new_generation_is_not_ready(clock):
    ctx = FakeContext(cr(2, status={"phase": PENDING, "observedGeneration": 1}))
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    roll_out(ctx, ready=2)
    ctx.find("apps/v1", "Deployment", "apps", "mc")["metadata"]["generation"] = 2
    assert rec.reconcile(ctx, ctx.obj).phase == PENDING


def test_running_becomes_degraded_when_a_replica_is_no_longer_ready(clock):
    ctx = FakeContext(cr(2, status={"phase": RUNNING, "observedGeneration": 1}))
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    roll_out(ctx, ready=1)
    result = rec.reconcile(ctx, ctx.obj)
    assert result.phase == DEGRADED
    assert result.reason == "ReplicasNotReady"
    assert "1/2" in result.message


def test_a_spec_change_goes_back_through_pending_by_the_engine_even_when_the_replicas_are_ready(clock):
    """The reconciler says where the rollout stands (Running: every replica is ready); the kind declares that a
    spec change goes through Pending, which the engine records first (tests/reconcilers/engine/
    test_step_typed.py; end to end in test_integration_kinds)."""
    assert MemcachedReconciler.spec_change_phase == PENDING
    ctx = FakeContext(cr(2, generation=2, status={"phase": RUNNING, "observedGeneration": 1}))
    assert ctx.spec_changed
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    roll_out(ctx, ready=2)
    assert rec.reconcile(ctx, ctx.obj).phase == RUNNING


def test_it_fails_when_not_available_within_the_progress_deadline(clock):
    ctx = FakeContext(cr(1, image="memcached:broken", deadline=5))
    rec = MemcachedReconciler()
    first = rec.reconcile(ctx, ctx.obj)
    assert first.phase == PENDING
    ctx.put({"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "mc-x", "namespace": "apps", "labels": memcached.selector_labels("mc")},
             "status": {"containerStatuses": [{"name": "memcached", "state": {"waiting": {
                 "reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}})
    ctx.obj["status"] = {"phase": PENDING, "observedGeneration": 1, **first.status}
    clock["t"] += 3
    second = rec.reconcile(ctx, ctx.obj)
    assert second.phase == PENDING
    assert 1.9 < second.requeue_after < 2.2  # woken up right at the deadline
    assert "ImagePullBackOff" in second.message
    clock["t"] += 2.5
    third = rec.reconcile(ctx, ctx.obj)
    assert third.phase == FAILED
    assert third.reason == "ProgressDeadlineExceeded"
    assert "ImagePullBackOff" in third.message
    # it stays Failed (no flapping back to Pending) until the spec changes or it becomes available
    ctx.obj["status"] = {"phase": FAILED, "observedGeneration": 1, "reason": third.reason, **third.status}
    assert rec.reconcile(ctx, ctx.obj).phase == FAILED
    roll_out(ctx, ready=1, size=1)
    assert rec.reconcile(ctx, ctx.obj).phase == RUNNING


def test_the_deadline_restarts_with_each_spec_change(clock):
    ctx = FakeContext(cr(1, deadline=5, generation=2, status={
        "phase": FAILED, "observedGeneration": 1, "progressStartedAt": "2020-01-01T00:00:00Z"}))
    result = MemcachedReconciler().reconcile(ctx, ctx.obj)
    assert result.phase == PENDING
    assert result.status["progressStartedAt"] == memcached._rfc3339(T0)


@pytest.mark.parametrize("spec, field", [
    ({"size": -1}, "spec.size"),
    ({"size": "three"}, "spec.size"),
    ({"image": "Not A Valid:Image"}, "spec.image"),
    ({"image": ""}, "spec.image"),
    ({"port": 0}, "spec.port"),
    ({"progressDeadlineSeconds": 0}, "spec.progressDeadlineSeconds"),
])
def test_an_invalid_spec_is_a_permanent_error_and_nothing_is_applied(spec, field, clock):
    obj = cr()
    obj["spec"].update(spec)
    ctx = FakeContext(obj)
    with pytest.raises(PermanentError) as info:
        MemcachedReconciler().reconcile(ctx, obj)
    assert info.value.reason == "InvalidSpec"
    assert field in info.value.message
    assert ctx.applied == []


def test_its_state_machine_allows_the_documented_lifecycle():
    machine = MemcachedReconciler.state_machine
    for source, target in [("", PENDING), (PENDING, RUNNING), (RUNNING, DEGRADED), (DEGRADED, RUNNING),
                           (RUNNING, PENDING), (PENDING, FAILED), (FAILED, PENDING), (RUNNING, "Terminating"),
                           ("Terminating", "Deleted")]:
        assert machine.allows(source, target), (source, target)
    assert not machine.allows("", RUNNING)
    assert not machine.allows("Deleted", PENDING)
    assert not machine.allows(PENDING, DEGRADED)


def test_its_deployment_carries_the_progress_deadline_of_its_spec(clock):
    ctx = FakeContext(cr(2, deadline=45))
    MemcachedReconciler().reconcile(ctx, ctx.obj)
    assert ctx.find("apps/v1", "Deployment", "apps", "mc")["spec"]["progressDeadlineSeconds"] == 45


def broken_rollout(ctx, *, size=3, conditions=()):
    """An image change to a tag that cannot be pulled: the old pods still serve (3 ready), the new ReplicaSet's
    one pod does not."""
    dep = ctx.find("apps/v1", "Deployment", "apps", "mc")
    dep["metadata"]["generation"] = 2
    dep["status"] = {"observedGeneration": 2, "replicas": size + 1, "updatedReplicas": 1, "readyReplicas": size,
                     "availableReplicas": size, "conditions": list(conditions)}


def test_old_replicas_ready_while_the_new_one_is_not_is_not_running(clock):
    ctx = FakeContext(cr(3, generation=2, status={"phase": PENDING, "observedGeneration": 2}))
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    broken_rollout(ctx)
    result = rec.reconcile(ctx, ctx.obj)
    assert result.phase == PENDING and result.reason == "RollingOut"
    assert result.status["readyReplicas"] == 0  # none of the current spec
    assert "1 out of 3 new replicas have been updated" in result.message
    available = next(c for c in result.conditions if c.type == "Available")
    assert (available.status, available.reason) == ("False", "ReplicasNotUpdated")


def test_a_rollout_past_the_deployments_progress_deadline_is_failed_with_that_reason(clock):
    ctx = FakeContext(cr(3, generation=2, status={"phase": PENDING, "observedGeneration": 2}))
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    broken_rollout(ctx, conditions=[{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                                     "message": 'ReplicaSet "mc-abc" has timed out progressing.'}])
    result = rec.reconcile(ctx, ctx.obj)
    assert result.phase == FAILED and result.reason == "ProgressDeadlineExceeded"
    assert "timed out progressing" in result.message
    assert MemcachedReconciler.state_machine.allows(PENDING, FAILED)
    assert MemcachedReconciler.state_machine.allows("RollingBack", FAILED)


def test_running_with_updated_replicas_unavailable_is_degraded_naming_the_count(clock):
    ctx = FakeContext(cr(3, status={"phase": RUNNING, "observedGeneration": 1}))
    rec = MemcachedReconciler()
    rec.reconcile(ctx, ctx.obj)
    roll_out(ctx, ready=1, size=3)
    result = rec.reconcile(ctx, ctx.obj)
    assert result.phase == DEGRADED
    assert "1 of 3 updated replicas are available" in result.message
    available = next(c for c in result.conditions if c.type == "Available")
    assert available.reason == "UpdatedReplicasUnavailable"
