"""kstatus conditions stay within metav1.Condition's limits (found by tests/faults/test_bad_input.py: a
Memcached whose 40 000-character image made a longer message had its status refused with 422 forever)."""

from __future__ import annotations

from reconcilers.core.types import Condition
from reconcilers.engine.kstatus import MESSAGE_MAX, condition_reason, kstatus_conditions
from reconcilers.kinds.memcached import MemcachedReconciler

REC = MemcachedReconciler()


def test_a_message_over_the_condition_limit_is_cut_with_an_ellipsis_and_a_short_one_kept():
    long = "x" * (MESSAGE_MAX + 10)
    conds = kstatus_conditions(REC, [], "Failed", "InvalidSpec", long, [Condition("Own", "False", "R", long)], 1,
                               "2030-01-01T00:00:00Z")
    assert {c["type"] for c in conds} == {"Ready", "Reconciling", "Stalled", "Own"}
    for c in conds:
        assert len(c["message"]) <= MESSAGE_MAX
    stalled = next(c for c in conds if c["type"] == "Stalled")
    assert stalled["message"] == "x" * (MESSAGE_MAX - 1) + "…"
    exact = kstatus_conditions(REC, [], "Failed", "InvalidSpec", "y" * MESSAGE_MAX, [], 1, "2030-01-01T00:00:00Z")
    assert next(c for c in exact if c["type"] == "Stalled")["message"] == "y" * MESSAGE_MAX


def test_a_reason_over_the_condition_limit_falls_back_to_the_phase():
    assert condition_reason("A" * 1024, "Failed") == "A" * 1024
    assert condition_reason("A" * 1025, "Failed") == "Failed"
