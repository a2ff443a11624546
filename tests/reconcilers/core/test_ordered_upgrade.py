"""The ordered upgrade's plan from live objects: one ordinal at a time from the highest, only when the budget and the
spread allow, blocked with the reason otherwise; the live partition is where it stands."""

from __future__ import annotations

import pytest

from reconcilers.core import ordered_upgrade as ou

NEW, OLD = "kv-new", "kv-old"


def sts(partition, replicas=3, *, generation=2, observed=2):
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "kv", "namespace": "ns", "generation": generation},
            "spec": {"replicas": replicas, "updateStrategy": {"type": "RollingUpdate",
                                                              "rollingUpdate": {"partition": partition}}},
            "status": {"observedGeneration": observed, "replicas": replicas, "readyReplicas": replicas,
                       "updatedReplicas": replicas - partition, "currentRevision": OLD, "updateRevision": NEW}}


def pod(i, revision, *, ready=True, node=None, unschedulable=""):
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    status = {"phase": "Running", "conditions": conds}
    if unschedulable:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable", "message": unschedulable}]}
    return {"metadata": {"name": f"kv-{i}", "labels": {ou.REVISION_LABEL: revision}},
            "spec": {"nodeName": node if node is not None else f"node-{i}"}, "status": status}


NODES = [{"metadata": {"name": f"node-{i}", "labels": {ou.ZONE_KEY: f"zone-{'abc'[i]}"}}} for i in range(3)]


def pdb(allowed, *, generation=1, observed=1):
    return {"metadata": {"name": "kv", "generation": generation},
            "status": {"observedGeneration": observed, "disruptionsAllowed": allowed}}


def pods_at(partition, overrides=None):
    overrides = overrides or {}
    return [overrides.get(i, pod(i, NEW if i >= partition else OLD)) for i in range(3)]


def plan(partition, pods=None, budget=1, **kw):
    kw.setdefault("min_available", 2)
    return ou.plan_upgrade(sts(partition), pods if pods is not None else pods_at(partition), pdb(budget), NODES, **kw)


@pytest.mark.parametrize(("value", "replicas", "count"), [(2, 3, 2), ("80%", 3, 3), ("50%", 3, 2), ("0%", 5, 0)])
def test_min_available_is_a_number_or_a_percentage_rounded_up(value, replicas, count):
    assert ou.min_available_count(value, replicas) == count


def test_a_budget_that_can_never_be_met_is_named():
    assert "minAvailable must be below replicas" in ou.budget_problem(3, 3)
    assert "keeps 3 of 3" in ou.budget_problem("80%", 3)
    assert ou.budget_problem(2, 3) is None
    assert "percentage" in ou.budget_problem("lots", 3)


def test_the_first_step_moves_the_highest_ordinal():
    step = plan(3)
    assert (step.action, step.partition, step.ordinal, step.reason) == (ou.STEP, 2, 2, "OrdinalMoved")
    assert step.message.startswith("ordinal 2: partition 3 -> 2")


def test_a_moved_ordinal_not_yet_ready_on_the_new_revision_is_waited_for():
    waiting = plan(2, pods_at(3))  # partition lowered; the StatefulSet controller has not replaced kv-2 yet
    assert (waiting.action, waiting.partition, waiting.ordinal) == (ou.WAIT, 2, 2)
    assert waiting.message.startswith("ordinal 2: waiting for kv-2")
    assert plan(2, pods_at(2, {2: pod(2, NEW, ready=False)})).action == ou.WAIT


def test_a_verified_ordinal_is_a_step_of_its_own_before_the_next_moves():
    first = plan(2)
    assert (first.action, first.ordinal, first.reason) == (ou.VERIFIED, 2, "OrdinalUpgraded")
    assert "in zone-c" in first.message
    second = plan(2, verified=True)
    assert (second.action, second.partition, second.ordinal) == (ou.STEP, 1, 1)


def test_an_exhausted_budget_blocks_and_names_the_unready_pod():
    blocked = plan(2, pods_at(2, {0: pod(0, OLD, ready=False)}), budget=0, verified=True)
    assert (blocked.action, blocked.reason, blocked.partition) == (ou.BLOCKED, ou.BUDGET_EXHAUSTED, 2)
    assert "allows 0 disruptions" in blocked.message and "not Ready: kv-0" in blocked.message


def test_a_pdb_that_still_allows_while_a_pod_is_unready_is_not_trusted():
    blocked = plan(2, pods_at(2, {0: pod(0, OLD, ready=False)}), budget=1, verified=True)
    assert blocked.action == ou.BLOCKED and blocked.reason == ou.BUDGET_EXHAUSTED


def test_a_pdb_status_that_lags_ready_pods_is_waited_for_not_blocked_on():
    lagging = plan(2, budget=0, verified=True)
    assert (lagging.action, lagging.reason) == (ou.WAIT, "BudgetStatusLagging")
    stale = ou.plan_upgrade(sts(2), pods_at(2), pdb(1, generation=2, observed=1), NODES, min_available=2,
                            verified=True)
    assert stale.action == ou.WAIT


def test_a_pending_pod_the_scheduler_cannot_place_blocks_with_its_message():
    message = "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints."
    blocked = plan(2, pods_at(2, {2: pod(2, NEW, ready=False, node="", unschedulable=message)}))
    assert (blocked.action, blocked.reason, blocked.ordinal) == (ou.BLOCKED, ou.SPREAD_UNSATISFIABLE, 2)
    assert message in blocked.message


def test_a_pod_not_ready_within_the_deadline_blocks():
    blocked = plan(2, pods_at(2, {2: pod(2, NEW, ready=False)}), step_elapsed=31, deadline=30)
    assert (blocked.action, blocked.reason) == (ou.BLOCKED, ou.DEADLINE_EXCEEDED)


def test_ready_pods_packed_into_one_zone_break_the_spread():
    packed = pods_at(2, {i: pod(i, NEW if i == 2 else OLD, node="node-0") for i in range(3)})
    blocked = plan(2, packed)
    assert blocked.reason == ou.SPREAD_UNSATISFIABLE and "more than maxSkew 1" in blocked.message


def test_partition_zero_with_every_ordinal_ready_is_done():
    done = plan(0)
    assert (done.action, done.partition, done.ordinal) == (ou.DONE, 0, None)


def test_an_unobserved_statefulset_is_waited_for():
    assert ou.plan_upgrade(sts(2, observed=1), pods_at(2), pdb(1), NODES, min_available=2).action == ou.WAIT


def test_the_ordinals_carry_revision_readiness_and_zone():
    states = plan(2, pods_at(2, {1: pod(1, OLD, ready=False)})).ordinals
    assert [(s.ordinal, s.updated, s.ready, s.zone) for s in states] == [
        (0, False, True, "zone-a"), (1, False, False, "zone-b"), (2, True, True, "zone-c")]
    assert states[2].as_status()["revision"] == NEW


def test_a_pod_lost_below_the_partition_while_an_ordinal_is_in_flight_blocks_on_the_budget():
    """The StatefulSet controller does not recreate the moved ordinal while another Pod is not Ready: waiting for
    the deadline would hide why."""
    lost = pods_at(2, {0: pod(0, OLD, ready=False), 2: pod(2, NEW, ready=False)})
    blocked = plan(2, lost, budget=0)
    assert (blocked.action, blocked.reason, blocked.ordinal) == (ou.BLOCKED, ou.BUDGET_EXHAUSTED, 2)
    assert "ordinal 2 in flight" in blocked.message and "not Ready: kv-0, kv-2" in blocked.message
