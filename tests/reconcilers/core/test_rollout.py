"""`rollout_status`: kubectl rollout status' rules for Deployments, StatefulSets and DaemonSets, branch by branch."""

from __future__ import annotations

import pytest

from reconcilers.core.rollout import COMPLETE, FAILED, PROGRESSING, Rollout, rollout_status, worst


def deployment(replicas=3, *, generation=2, observed=2, updated=3, total=3, ready=None, available=3,
               conditions=()):
    status = {"observedGeneration": observed, "replicas": total, "updatedReplicas": updated,
              "readyReplicas": available if ready is None else ready, "availableReplicas": available,
              "conditions": list(conditions)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": replicas}, "status": status}


def statefulset(replicas=3, *, generation=2, observed=2, ready=3, updated=3, total=3, strategy=None,
                current="web-1", update="web-1"):
    spec = {"replicas": replicas}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": generation},
            "spec": spec, "status": {"observedGeneration": observed, "replicas": total, "readyReplicas": ready,
                                     "updatedReplicas": updated, "currentRevision": current,
                                     "updateRevision": update}}


DEADLINE = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "web-abc" has timed out progressing.'}


# -- Deployments ------------------------------------------------------------------------------------------------


def test_a_deployment_with_every_replica_updated_and_available_is_complete():
    r = rollout_status(deployment())
    assert (r.state, r.reason, r.complete, r.failed) == (COMPLETE, "RolledOut", True, False)
    assert (r.desired, r.updated, r.ready, r.total, r.count) == (3, 3, 3, 3, "3/3 ready")


def test_a_deployment_whose_spec_update_is_not_observed_is_progressing_even_when_its_counts_look_done():
    r = rollout_status(deployment(generation=3, observed=2))
    assert (r.state, r.reason) == (PROGRESSING, "SpecUpdateNotObserved")
    assert r.message == "waiting for the spec update to be observed"


def test_the_progress_deadline_exceeded_is_a_failed_rollout():
    r = rollout_status(deployment(updated=1, total=4, conditions=[DEADLINE]))
    assert (r.state, r.reason, r.failed) == (FAILED, "ProgressDeadlineExceeded", True)
    assert "exceeded its progress deadline" in r.message and "timed out progressing" in r.message


def test_a_progress_deadline_of_an_older_generation_is_not_judged_until_the_new_one_is_observed():
    assert rollout_status(deployment(generation=3, observed=2, conditions=[DEADLINE])).state == PROGRESSING


def test_a_progressing_condition_with_another_reason_is_not_a_failure():
    ok = {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
    assert rollout_status(deployment(conditions=[ok])).state == COMPLETE


def test_the_broken_image_case_old_pods_ready_new_pod_not_is_progressing_with_no_current_replica_ready():
    """3 old Pods serve, the new ReplicaSet's one Pod waits in ImagePullBackOff: readyReplicas is 3 of 3, yet
    nothing of the current spec is ready."""
    r = rollout_status(deployment(updated=1, total=4, ready=3, available=3))
    assert (r.state, r.reason) == (PROGRESSING, "ReplicasNotUpdated")
    assert r.message == "1 out of 3 new replicas have been updated"
    assert (r.ready, r.count) == (0, "0/3 ready")


def test_old_replicas_pending_termination_are_progressing():
    r = rollout_status(deployment(updated=3, total=4, available=4))
    assert (r.state, r.reason, r.message) == (PROGRESSING, "OldReplicasPendingTermination",
                                              "1 old replicas are pending termination")
    assert r.ready == 3


def test_updated_replicas_not_all_available_are_progressing():
    r = rollout_status(deployment(updated=3, total=3, available=1))
    assert (r.state, r.reason, r.message) == (PROGRESSING, "UpdatedReplicasUnavailable",
                                              "1 of 3 updated replicas are available")
    assert r.count == "1/3 ready"


def test_a_deployment_without_status_or_replicas_uses_the_api_defaults():
    bare = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": 1}, "spec": {}}
    r = rollout_status(bare)
    assert (r.state, r.desired) == (PROGRESSING, 1)
    scaled_to_zero = deployment(0, updated=0, total=0, available=0)
    assert rollout_status(scaled_to_zero).state == COMPLETE


# -- StatefulSets -----------------------------------------------------------------------------------------------


def test_a_statefulset_needs_its_spec_update_observed_and_an_observed_generation_at_all():
    assert rollout_status(statefulset(generation=3, observed=2)).reason == "SpecUpdateNotObserved"
    never = statefulset(generation=0, observed=0)
    assert rollout_status(never).state == PROGRESSING  # kubectl: observedGeneration 0 is never observed


def test_a_statefulset_with_pods_not_ready_is_progressing():
    r = rollout_status(statefulset(ready=1))
    assert (r.state, r.reason, r.message) == (PROGRESSING, "ReplicasNotReady", "waiting for 2 pods to be ready")


def test_a_statefulset_with_a_partition_is_complete_once_the_pods_above_it_are_updated():
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    waiting = rollout_status(statefulset(updated=0, strategy=strategy, update="web-2"))
    assert (waiting.state, waiting.reason) == (PROGRESSING, "PartitionNotUpdated")
    assert waiting.message.startswith("0 out of 1 new pods have been updated")
    done = rollout_status(statefulset(updated=1, strategy=strategy, update="web-2"))
    assert (done.state, done.ready) == (COMPLETE, 1)  # only the pod above the partition is of the current spec


def test_a_statefulset_with_partition_zero_needs_every_pod_updated():
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert rollout_status(statefulset(updated=2, strategy=strategy, update="web-2")).state == PROGRESSING
    assert rollout_status(statefulset(updated=3, strategy=strategy, update="web-2")).state == COMPLETE


def test_a_statefulset_without_a_rolling_update_block_compares_revisions():
    r = rollout_status(statefulset(updated=1, update="web-2", current="web-1"))
    assert (r.state, r.reason) == (PROGRESSING, "RevisionNotUpdated") and "web-2" in r.message
    assert rollout_status(statefulset(update="web-2", current="web-2")).state == COMPLETE


def test_an_on_delete_statefulset_is_not_judged_beyond_observed_and_ready():
    strategy = {"type": "OnDelete"}
    r = rollout_status(statefulset(updated=0, update="web-2", strategy=strategy))
    assert (r.state, r.reason) == (COMPLETE, "OnDelete")
    assert rollout_status(statefulset(ready=2, strategy=strategy)).state == PROGRESSING


# -- DaemonSets, other kinds, several workloads ---------------------------------------------------------------


def daemonset(*, desired=3, updated=3, available=3, generation=1, observed=1):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "generation": generation},
            "spec": {}, "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                                   "currentNumberScheduled": desired, "updatedNumberScheduled": updated,
                                   "numberAvailable": available, "numberReady": available}}


@pytest.mark.parametrize("kwargs, state, reason", [
    ({}, COMPLETE, "RolledOut"),
    ({"generation": 2}, PROGRESSING, "SpecUpdateNotObserved"),
    ({"updated": 1}, PROGRESSING, "PodsNotUpdated"),
    ({"available": 2}, PROGRESSING, "UpdatedPodsUnavailable"),
])
def test_a_daemonset_by_kubectls_rules(kwargs, state, reason):
    r = rollout_status(daemonset(**kwargs))
    assert (r.state, r.reason) == (state, reason)


def test_other_kinds_have_no_rollout_rules():
    with pytest.raises(ValueError, match="no rollout rules"):
        rollout_status({"apiVersion": "v1", "kind": "Service"})
    with pytest.raises(ValueError, match="no rollout rules"):
        rollout_status({"apiVersion": "example.com/v1", "kind": "Deployment"})


def test_worst_of_several_is_the_one_furthest_from_complete_with_the_fewest_ready():
    done = rollout_status(deployment())
    slow = rollout_status(statefulset(ready=1))
    broken = rollout_status(deployment(updated=1, total=4, conditions=[DEADLINE]))
    assert worst([done, slow]).reason == "ReplicasNotReady"
    combined = worst([done, slow, broken])
    assert (combined.state, combined.kind, combined.ready) == (FAILED, "Deployment", 0)
    assert worst([]) == Rollout(COMPLETE, "RolledOut", "no workloads")
