"""The operator versions compared (reconcilers.services.selectors.versions), on rows made directly: two versions
with errors on one, the failed transitions, anomalies and time to ready each is credited with, a viewer limited to
a namespace, the window and the cap on the runs read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import Anomaly, AnomalyCategory, ReconcileRun
from reconcilers.services.selectors.versions import nearest_rank, version_comparison
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db

OLD, NEW = "opsconsole 1.0.0", "registry.example/opsconsole:1.1.0-rc1"


def run(res, version: str, *, result: str = "success", duration: float = 0.1, ago: float = 60) -> ReconcileRun:
    return ReconcileRun.objects.create(
        key=res.key, kind=res.kind, resource=res, started_at=timezone.now() - timedelta(seconds=ago),
        duration_seconds=duration, result=result, error_class="Boom" if result == "error" else "",
        operator_version=version)


def by_version(comparison) -> dict:
    return {v.version: v for v in comparison.versions}


def test_two_versions_are_compared_and_the_one_with_errors_stands_out():
    a, b, c = f.resource("a"), f.resource("b"), f.resource("c")
    for i, duration in enumerate((0.1, 0.2, 0.3, 0.4)):
        run(a if i % 2 else b, OLD, duration=duration, ago=300 - i)
    run(c, NEW, result="error", duration=2.0, ago=200)
    run(c, NEW, duration=1.0, ago=100)
    run(a, NEW, duration=0.5, ago=50)
    comparison = version_comparison()
    old, new = by_version(comparison)[OLD], by_version(comparison)[NEW]
    assert [v.version for v in comparison.versions] == [OLD, NEW]  # most runs first
    assert (old.runs, old.error_runs, old.error_rate, old.objects) == (4, 0, 0.0, 2)
    assert (new.runs, new.error_runs, new.objects) == (3, 1, 2) and new.error_rate == pytest.approx(1 / 3)
    assert (old.duration_p50, old.duration_p95) == (0.2, 0.4)
    assert (new.duration_p50, new.duration_p95) == (1.0, 2.0)
    assert comparison.compared and comparison.highest_error_rate == NEW
    assert new.highest_error_rate and not old.highest_error_rate
    assert (comparison.runs_read, comparison.capped) == (7, False)


def test_failed_transitions_and_anomalies_are_credited_to_the_version_that_ran():
    a, b = f.resource("a", phase=""), f.resource("b", phase="")
    old_run, new_run = run(a, OLD, ago=100), run(b, NEW, result="error", ago=90)
    f.transition(a, "Pending", run=old_run)
    f.transition(b, "Pending", run=new_run)
    f.transition(b, "Failed", run=new_run)  # into the failed class, by the new version's run
    f.transition(a, "Failed", actor="user:ann")  # recorded by no run: nobody's evidence
    run(a, NEW, ago=30)  # a's last run in the window is the new version's
    run(b, OLD, ago=80)
    run(b, NEW, ago=20)
    for res, to_phase in ((a, "Running"), (b, "Running"), (b, "Degraded")):
        Anomaly.objects.create(resource=res, to_phase=to_phase, category=AnomalyCategory.OUT_OF_BAND,
                               actor="manager:kubectl")
    figures = by_version(version_comparison())
    assert (figures[NEW].failed_transitions, figures[OLD].failed_transitions) == (1, 0)
    assert (figures[NEW].anomalies, figures[OLD].anomalies) == (3, 0)


def test_time_to_ready_is_measured_for_objects_created_in_the_window_by_the_version_that_made_them_ready():
    now = timezone.now()
    fast, slow, old_object = f.resource("fast", phase=""), f.resource("slow", phase=""), f.resource("old", phase="")
    f.transition(fast, "Pending", at=now - timedelta(seconds=100), run=run(fast, OLD, ago=100))
    f.transition(fast, "Running", at=now - timedelta(seconds=90), run=run(fast, NEW, ago=90))
    f.transition(slow, "Pending", at=now - timedelta(seconds=100), run=run(slow, NEW, ago=100))
    f.transition(slow, "Running", at=now - timedelta(seconds=40), run=run(slow, NEW, ago=40))
    f.transition(slow, "Pending", at=now - timedelta(seconds=30))
    f.transition(slow, "Running", at=now - timedelta(seconds=10), run=run(slow, OLD, ago=10))  # not the first
    f.transition(old_object, "Pending", at=now - timedelta(hours=3))  # created before the window
    f.transition(old_object, "Running", at=now - timedelta(seconds=5), run=run(old_object, OLD, ago=5))
    figures = by_version(version_comparison(now=now))
    assert figures[NEW].ready_objects == 2
    assert (figures[NEW].time_to_ready_p50, figures[NEW].time_to_ready_p95) == (pytest.approx(10), pytest.approx(60))
    assert (figures[OLD].ready_objects, figures[OLD].time_to_ready_p50) == (0, None)


def test_a_viewer_limited_to_a_namespace_sees_only_its_runs():
    mine, theirs = f.resource("mine"), f.resource("theirs", namespace="secret")
    run(mine, OLD)
    run(theirs, NEW, result="error")
    Anomaly.objects.create(resource=theirs, to_phase="Running", category=AnomalyCategory.OUT_OF_BAND)
    limited = version_comparison(namespaces=frozenset({"default"}))
    assert [(v.version, v.runs, v.anomalies) for v in limited.versions] == [(OLD, 1, 0)]
    assert not limited.compared and limited.highest_error_rate is None
    assert {v.version for v in version_comparison().versions} == {OLD, NEW}
    assert version_comparison(namespaces=frozenset()).versions == []


def test_the_window_kind_and_cap_bound_what_is_read():
    res, tenant = f.resource("a"), f.resource("t", kind=f.TENANT)
    run(res, OLD, ago=7200)  # before the default hour
    run(res, NEW, ago=600)
    run(res, NEW, ago=60)
    run(tenant, OLD, ago=60)
    assert {v.version: v.runs for v in version_comparison().versions} == {NEW: 2, OLD: 1}
    assert {v.version: v.runs for v in version_comparison(kind="Memcached").versions} == {NEW: 2}
    wider = version_comparison(since=timezone.now() - timedelta(hours=3), kind="Memcached")
    assert {v.version: v.runs for v in wider.versions} == {NEW: 2, OLD: 1}
    capped = version_comparison(since=timezone.now() - timedelta(hours=3), cap=2)
    assert (capped.runs_read, capped.capped) == (2, True)
    assert sum(v.runs for v in capped.versions) == 2  # the newest two


def test_equal_error_rates_single_out_no_version():
    a = f.resource("a")
    run(a, OLD, result="error")
    run(a, NEW, result="error")
    comparison = version_comparison()
    assert comparison.compared and comparison.highest_error_rate is None
    assert nearest_rank([], 0.5) is None and nearest_rank([3.0, 1.0, 2.0], 0.5) == 2.0
