"""`run_groups` (reconcilers.services.selectors.runs): consecutive runs with the same result and phase merge into
one group; a different result, error class, phase change or manual request splits them; counts, time ranges and
total durations are right. Pure: plain objects, no database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from reconcilers.services.selectors.runs import run_groups

T0 = datetime(2026, 1, 1, 14, 2, tzinfo=UTC)


@dataclass
class FakeRun:
    pk: int
    started_at: datetime
    result: str
    duration_seconds: float = 0.1
    error_class: str = ""
    request_id: int | None = None


@dataclass
class FakeTransition:
    seq: int
    created_at: datetime
    from_phase: str
    to_phase: str
    run_id: int | None = None


def _runs(*results: str, every: float = 5.0, **extra) -> list[FakeRun]:
    """Runs oldest first, one every `every` seconds, returned newest first (as the page lists them)."""
    runs = [FakeRun(pk=i + 1, started_at=T0 + timedelta(seconds=every * i), result=r, **extra)
            for i, r in enumerate(results)]
    return runs[::-1]


def test_thirty_seven_requeue_after_runs_are_one_group_with_count_range_and_total():
    runs = _runs(*["requeue_after"] * 37, every=5.0)
    groups = run_groups(runs, current_phase="Pending")
    assert len(groups) == 1
    g = groups[0]
    assert (g.count, g.result, g.phase) == (37, "requeue_after", "Pending")
    assert g.first_at == T0 and g.last_at == T0 + timedelta(seconds=180)
    assert abs(g.total_seconds - 3.7) < 1e-9
    assert [r.pk for r in g.runs] == list(range(37, 0, -1))  # newest first inside the group


def test_a_different_result_splits_and_groups_come_newest_first():
    runs = _runs("success", "requeue_after", "requeue_after", "error", "error", "requeue_after")
    groups = run_groups(runs, current_phase="Running")
    assert [(g.result, g.count) for g in groups] == [("requeue_after", 1), ("error", 2), ("requeue_after", 2),
                                                     ("success", 1)]


def test_errors_of_different_classes_are_separate_groups_that_name_their_class():
    runs = [FakeRun(pk=3, started_at=T0 + timedelta(seconds=10), result="error", error_class="Conflict"),
            FakeRun(pk=2, started_at=T0 + timedelta(seconds=5), result="error", error_class="Timeout"),
            FakeRun(pk=1, started_at=T0, result="error", error_class="Timeout")]
    groups = run_groups(runs, current_phase="Failed")
    assert [(g.error_class, g.count) for g in groups] == [("Conflict", 1), ("Timeout", 2)]


def test_a_transition_recorded_by_a_run_starts_a_new_group_in_its_phase():
    runs = _runs(*["requeue_after"] * 6)  # pks 1..6
    transitions = [FakeTransition(seq=4, run_id=4, created_at=T0 + timedelta(seconds=15.05),
                                  from_phase="Pending", to_phase="Failed")]
    groups = run_groups(runs, transitions, current_phase="Failed")
    assert [(g.phase, g.count, g.anchor) for g in groups] == [("Failed", 3, 4), ("Pending", 3, 1)]


def test_a_transition_made_between_runs_by_no_run_splits_them_by_time():
    runs = _runs("success", "success", "success", "success")  # at 0, 5, 10, 15 s
    transitions = [FakeTransition(seq=7, created_at=T0 + timedelta(seconds=7), from_phase="Running",
                                  to_phase="Degraded", run_id=None)]
    groups = run_groups(runs, transitions, current_phase="Degraded")
    assert [(g.phase, g.count) for g in groups] == [("Degraded", 2), ("Running", 2)]


def test_a_flap_and_back_between_two_runs_still_splits_them():
    runs = _runs("requeue_after", "requeue_after")
    transitions = [FakeTransition(seq=2, created_at=T0 + timedelta(seconds=1), from_phase="Running", to_phase="Failed"),
                   FakeTransition(seq=3, created_at=T0 + timedelta(seconds=2), from_phase="Failed",
                                  to_phase="Running")]
    groups = run_groups(runs, transitions, current_phase="Running")
    assert [(g.phase, g.count) for g in groups] == [("Running", 1), ("Running", 1)]


def test_a_manual_run_is_a_row_of_its_own():
    runs = _runs("success", "success", "success")
    runs[1].request_id = 9  # the middle one handled a manual request
    assert [g.count for g in run_groups(runs, current_phase="Running")] == [1, 1, 1]


def test_no_runs_are_no_groups():
    assert run_groups([], current_phase="Running") == []
