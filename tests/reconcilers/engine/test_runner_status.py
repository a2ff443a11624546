"""The status the reconcile step writes: kstatus conditions, kept transition times, the manual-request token."""

from __future__ import annotations

from reconcilers.core.types import Condition
from reconcilers.engine.kstatus import condition_reason, kstatus_conditions
from reconcilers.engine.step import PhaseChange, build_status, catch_up_needed
from reconcilers.kinds.memcached import MACHINE, MemcachedReconciler

T1, T2 = "2030-01-01T00:00:00Z", "2030-01-01T00:05:00Z"
REC = MemcachedReconciler()


def by_type(conditions):
    return {c["type"]: c for c in conditions}


def test_a_running_object_is_ready_not_reconciling_not_stalled():
    conds = by_type(kstatus_conditions(REC, [], "Running", "AllReplicasReady", "2/2", [], 3, T1))
    assert conds["Ready"]["status"] == "True" and conds["Ready"]["reason"] == "AllReplicasReady"
    assert conds["Reconciling"]["status"] == "False"
    assert conds["Stalled"]["status"] == "False"
    assert all(c["observedGeneration"] == 3 and c["lastTransitionTime"] == T1 for c in conds.values())


def test_a_pending_object_is_reconciling_and_a_failed_one_is_stalled():
    pending = by_type(kstatus_conditions(REC, [], "Pending", "RollingOut", "0/2", [], 1, T1))
    assert (pending["Ready"]["status"], pending["Reconciling"]["status"], pending["Stalled"]["status"]) == (
        "False", "True", "False")
    assert pending["Reconciling"]["reason"] == "RollingOut"
    failed = by_type(kstatus_conditions(REC, [], "Failed", "InvalidSpec", "bad", [], 1, T1))
    assert (failed["Ready"]["status"], failed["Reconciling"]["status"], failed["Stalled"]["status"]) == (
        "False", "False", "True")
    assert failed["Stalled"]["reason"] == "InvalidSpec" and failed["Stalled"]["message"] == "bad"


def test_the_transition_time_is_kept_while_a_condition_status_holds_and_moves_when_it_changes():
    first = kstatus_conditions(REC, [], "Pending", "RollingOut", "0/2", [], 1, T1)
    still = by_type(kstatus_conditions(REC, first, "Pending", "RollingOut", "1/2", [], 1, T2))
    assert still["Reconciling"]["lastTransitionTime"] == T1
    assert still["Ready"]["lastTransitionTime"] == T1
    moved = by_type(kstatus_conditions(REC, first, "Running", "AllReplicasReady", "2/2", [], 1, T2))
    assert moved["Ready"]["lastTransitionTime"] == T2
    assert moved["Reconciling"]["lastTransitionTime"] == T2
    assert moved["Stalled"]["lastTransitionTime"] == T1  # False before, False now


def test_the_reconcilers_conditions_follow_and_an_invalid_reason_falls_back_to_the_phase():
    extra = [Condition("Available", "True", "AllReplicasReady")]
    conds = kstatus_conditions(REC, [], "Running", "not camel case!", "", extra, 1, T1)
    assert [c["type"] for c in conds] == ["Ready", "Reconciling", "Stalled", "Available"]
    assert conds[0]["reason"] == "Running"
    assert condition_reason("Fine_Reason", "X") == "Fine_Reason"
    assert condition_reason("", "X") == "X"


def test_build_status_sets_phase_generation_extras_and_the_token_and_drops_none_extras():
    old = {"phase": "Pending", "progressStartedAt": T1, "custom": "kept"}
    change = PhaseChange("Running", "AllReplicasReady", "2/2")
    new = build_status(REC, old, change, [], {"readyReplicas": 2, "progressStartedAt": None}, 4, "tok-1", now=T2)
    assert new["phase"] == "Running" and new["observedGeneration"] == 4
    assert new["readyReplicas"] == 2 and "progressStartedAt" not in new and new["custom"] == "kept"
    assert new["lastHandledReconcileAt"] == "tok-1"
    assert new["reason"] == "AllReplicasReady" and new["message"] == "2/2"


def test_build_status_answers_none_when_nothing_would_change():
    change, extra = PhaseChange("Running", "AllReplicasReady", "2/2"), {"readyReplicas": 2}
    first = build_status(REC, {}, change, [], extra, 1, None, now=T1)
    assert build_status(REC, first, change, [], extra, 1, None, now=T2) is None
    assert build_status(REC, first, None, [], {}, 1, None) is None
    token_only = build_status(REC, first, None, [], {}, 1, "tok")
    assert token_only == {**first, "lastHandledReconcileAt": "tok"}


def test_a_phase_written_but_never_recorded_is_caught_up_before_moving_on():
    assert catch_up_needed(MACHINE, "Running", "Pending", "Running")  # spec change's Pending was lost
    assert not catch_up_needed(MACHINE, "Running", "Running", "Pending")  # nothing lost
    assert not catch_up_needed(MACHINE, "Pending", "Running", "Running")  # the recording does it itself
    assert not catch_up_needed(MACHINE, None, "Pending", "Running")  # no row: recording starts from initial
    assert not catch_up_needed(MACHINE, "", "Pending", "Running")
    assert not catch_up_needed(MACHINE, "Running", "Deleted", "Running")  # not a way the machine allows
