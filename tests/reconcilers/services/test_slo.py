"""Issue 42, time in phase as an SLO: the attainment of a phase objective computed from the transitions on record
is the one the histogram opsconsole_phase_seconds gives (same events, same bound), per window; the burn rate
follows; objectives are checked as declared."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from reconcilers.core.objectives import BOUNDS, PhaseObjective, objectives_of
from reconcilers.engine import metrics
from reconcilers.services import slo
from tests.reconcilers.audit_support import KIND, MACHINE, observed, record

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def bucket(le: float) -> float:
    return REGISTRY.get_sample_value("opsconsole_phase_seconds_bucket",
                                     {"kind": KIND.kind, "phase": "Pending", "le": str(float(le))}) or 0.0


def count() -> float:
    return REGISTRY.get_sample_value("opsconsole_phase_seconds_count", {"kind": KIND.kind, "phase": "Pending"}) or 0.0


def test_objectives_are_checked_and_a_kind_without_any_gets_its_initial_phase_default():
    assert BOUNDS == metrics.TIME_IN_PHASE_BUCKETS
    with pytest.raises(ValueError, match="within_seconds"):
        PhaseObjective("Pending", within_seconds=299)
    with pytest.raises(ValueError, match="target"):
        PhaseObjective("Pending", target=99)
    with pytest.raises(ValueError, match="phase"):
        PhaseObjective("")

    class Plain:
        state_machine = MACHINE

    (default,) = objectives_of(Plain())
    assert (default.phase, default.within_seconds, default.target) == ("Pending", 300, 0.99)
    assert default.title == "99 % of Pending phases are left within 5 min"


@pytest.mark.django_db
def test_attainment_from_the_record_matches_the_histogram_and_gives_the_burn_rate(monkeypatch):
    clock = {"now": T0}
    monkeypatch.setattr(timezone, "now", lambda: clock["now"])
    before_good, before_total = bucket(300), count()
    # five objects enter Pending at T0 and leave it after these many seconds; one more leaves it two hours later
    for i, seconds in enumerate([10, 100, 299, 301, 1000]):
        clock["now"] = T0
        obj = observed(f"slo-{i}")
        record(obj, "Pending")
        clock["now"] = T0 + timedelta(seconds=seconds)
        record(observed(f"slo-{i}"), "Running")
    clock["now"] = T0
    record(observed("slo-late"), "Pending")
    clock["now"] = T0 + timedelta(hours=2)
    record(observed("slo-late"), "Running")

    good, total = bucket(300) - before_good, count() - before_total
    assert (good, total) == (3, 6)
    objective = PhaseObjective("Pending", 300, 0.99)
    report = slo.attainment(KIND.kind, objective, now=T0 + timedelta(hours=2))
    by_window = {w.window: w for w in report.windows}
    assert (by_window["30d"].good, by_window["30d"].total) == (good, total)
    assert by_window["30d"].attainment == pytest.approx(good / total)
    assert by_window["30d"].burn_rate == pytest.approx((1 - 3 / 6) / 0.01)
    # over the last hour only the late departure counts: it took 2 h
    assert (by_window["1h"].good, by_window["1h"].total, by_window["1h"].attainment) == (0, 1, 0.0)
    assert by_window["1h"].burn_rate == pytest.approx(100.0)
    empty = slo.attainment(KIND.kind, PhaseObjective("Degraded", 60, 0.9), now=T0)
    assert all(w.total == 0 and w.attainment is None and w.burn_rate is None for w in empty.windows)
    assert report.as_dict()["windows"][2]["good"] == 3
