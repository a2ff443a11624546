"""The overview's figures on a small dataset whose answers are worked out by hand: transitions per edge over the
last hour and the last day (one query for both windows), the median time spent in a state before leaving it
(each departure paired with the transition that entered the state, even when that one is older than the
window), the namespace limit, the per-state sample bound, and the short per-process memo."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reconcilers.services.selectors import read_memo, stats
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
H, M = 3600.0, 60.0
STATES = ("Pending", "Running", "Degraded", "Failed", "Terminating", "Deleted")


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def dataset(now):
    """Three Memcached resources (team-a: a, c; team-b: b) and one Tenant, with transitions at known times."""

    def chain(res, steps):
        for phase, ago in steps:
            f.transition(res, phase, at=now - ago)

    a = f.resource("a", "team-a", phase="")
    chain(a, [("Pending", timedelta(days=3)), ("Running", timedelta(hours=2)),       # Pending: 70 h
              ("Degraded", timedelta(minutes=30)), ("Running", timedelta(minutes=10))])  # Running 90 min, Degraded 20
    b = f.resource("b", "team-b", phase="")
    chain(b, [("Pending", timedelta(hours=50)), ("Running", timedelta(hours=26)),     # Pending: 24 h, left 26 h ago
              ("Degraded", timedelta(hours=5)), ("Running", timedelta(minutes=40))])   # Running 21 h, Degraded 260 min
    c = f.resource("c", "team-a", phase="")
    chain(c, [("Pending", timedelta(minutes=45)), ("Running", timedelta(minutes=15))])  # Pending: 30 min
    t = f.resource("t", kind=f.TENANT, phase="")
    chain(t, [("Pending", timedelta(minutes=5))])
    return {"a": a, "b": b, "c": c, "t": t}


def test_edge_counts_for_the_last_hour_and_day_come_from_the_hour_counts_and_each_windows_first_hour(dataset, now):
    with CaptureQueriesContext(connection) as queries:
        counts = stats.edge_window_counts({"hour": now - timedelta(hours=1), "day": now - timedelta(days=1)})
    reads = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT") and "FROM" in q["sql"]]
    trail = [sql for sql in reads if 'FROM "reconcilers_transition"' in sql]
    assert len(trail) == 2  # the part of each window's first hour before a whole bucket
    assert len([sql for sql in reads if "FROM reconcilers_transitioncount WHERE" in sql]) == 1  # every whole hour
    assert counts["Memcached"]["hour"] == {
        ("", "Pending"): 1, ("Pending", "Running"): 1, ("Running", "Degraded"): 1, ("Degraded", "Running"): 2,
    }
    assert counts["Memcached"]["day"] == {  # a's and b's Pending entries and b's Pending → Running are older
        ("", "Pending"): 1, ("Pending", "Running"): 2, ("Running", "Degraded"): 2, ("Degraded", "Running"): 2,
    }
    assert counts["Tenant"] == {"hour": {("", "Pending"): 1}, "day": {("", "Pending"): 1}}
    assert stats.edge_counts("Memcached", now - timedelta(days=1)) == counts["Memcached"]["day"]


def test_edge_counts_are_limited_to_the_callers_namespaces(dataset, now):
    counts = stats.edge_window_counts({"hour": now - timedelta(hours=1), "day": now - timedelta(days=1)},
                                      namespaces=frozenset({"team-a"}))
    assert counts["Memcached"]["hour"] == {
        ("", "Pending"): 1, ("Pending", "Running"): 1, ("Running", "Degraded"): 1, ("Degraded", "Running"): 1,
    }
    assert counts["Memcached"]["day"] == counts["Memcached"]["hour"] | {("Pending", "Running"): 2}
    assert "Tenant" not in counts  # cluster-scoped: not in team-a


def test_dwell_medians_pair_each_departure_with_the_transition_that_entered_the_state(dataset, now):
    medians = stats.state_dwell_medians("Memcached", now - timedelta(days=1), states=STATES)
    assert medians == {
        "Pending": pytest.approx((70 * H + 30 * M) / 2),  # a entered Pending 3 days ago, left 2 h ago; c: 30 min
        "Running": pytest.approx((90 * M + 21 * H) / 2),
        "Degraded": pytest.approx((20 * M + 260 * M) / 2),
    }  # b's Pending → Running was 26 h ago: outside the window; states never left have no figure
    team_a = stats.state_dwell_medians("Memcached", now - timedelta(days=1), states=STATES,
                                       namespaces=frozenset({"team-a"}))
    assert team_a == {"Pending": pytest.approx((70 * H + 30 * M) / 2), "Running": pytest.approx(90 * M),
                      "Degraded": pytest.approx(20 * M)}


def test_a_small_sample_still_gives_every_state_left_its_own_median(dataset, now):
    medians = stats.state_dwell_medians("Memcached", now - timedelta(days=1), states=STATES, sample=1)
    # the newest departure from each state: c left Pending 15 min ago, a left Running 30 min and Degraded 10 min ago
    assert medians == {"Pending": pytest.approx(30 * M), "Running": pytest.approx(90 * M),
                       "Degraded": pytest.approx(20 * M)}


def test_machine_figures_gather_both_windows_and_the_medians_per_kind(dataset):
    figures = stats.machine_figures({"Memcached": STATES, "Tenant": ("Pending", "Ready")}, ttl=0)
    assert figures["Memcached"]["hour"][("Degraded", "Running")] == 2
    assert figures["Memcached"]["day"][("Pending", "Running")] == 2
    assert figures["Memcached"]["dwell"]["Running"] == pytest.approx((90 * M + 21 * H) / 2)
    assert figures["Tenant"] == {"hour": {("", "Pending"): 1}, "day": {("", "Pending"): 1}, "dwell": {}}


def test_machine_figures_are_memoised_for_a_few_seconds_per_namespace_set(dataset, now):
    machines = {"Memcached": STATES}
    first = stats.machine_figures(machines, ttl=60)
    f.transition(dataset["c"], "Degraded", at=now)
    assert stats.machine_figures(machines, ttl=60) == first  # memoised
    assert stats.machine_figures(machines, ttl=60, namespaces=frozenset({"team-a"}))["Memcached"]["hour"][
        ("Running", "Degraded")] == 2  # another namespace set: its own entry, read now
    assert stats.machine_figures(machines, ttl=0)["Memcached"]["hour"][("Running", "Degraded")] == 2
    read_memo.stats_cache_clear()
    assert stats.machine_figures(machines, ttl=60)["Memcached"]["hour"][("Running", "Degraded")] == 2


def test_the_overview_page_shows_the_figures(dataset, as_role, settings):
    settings.OPSCONSOLE_OVERVIEW_CACHE_SECONDS = 0
    html = as_role("viewer").get("/").content.decode()
    assert "<title>Degraded → Running: 2 in the last hour, 2 in the last day</title>" in html
    assert "<title>Pending → Running: 1 in the last hour, 2 in the last day</title>" in html
    assert "<title>Running → Pending: 0 in the last hour, 0 in the last day</title>" in html
    assert "median 11 h before leaving" in html  # Running: (90 min + 21 h) / 2 = 11.25 h
    assert "median 2 h before leaving" in html  # Degraded: (20 + 260 min) / 2 = 140 min
    fragment = as_role("viewer", ["team-a"]).get("/?_live=machines").json()["fragments"]["machines"]
    assert "<title>Degraded → Running: 1 in the last hour, 1 in the last day</title>" in fragment


def test_an_engine_read_past_its_ttl_answers_the_last_value_while_one_thread_reads_the_next():
    calls, release, done = [], threading.Event(), threading.Event()

    def read():
        calls.append(len(calls))
        if len(calls) > 1:
            release.wait(5)
            done.set()
        return len(calls)

    assert read_memo.cached("probe", 0.0, read, background=True) == 1  # nothing memoised yet: read now
    assert read_memo.cached("probe", 0.0, read, background=True) == 1  # stale: answered at once, refresh started
    assert read_memo.cached("probe", 0.0, read, background=True) == 1  # one refresh at a time
    release.set()
    assert done.wait(5)
    for _ in range(100):
        if read_memo.cached("probe", 60.0, read, background=True) == 2:
            break
        time.sleep(0.01)
    assert read_memo.cached("probe", 60.0, read, background=True) == 2
    assert len(calls) == 2


@pytest.mark.parametrize("method", ["counted", "percentile", "offset"])
def test_the_time_in_the_current_phase_has_its_median_and_longest_per_phase(now, method):
    if method == "percentile" and connection.vendor != "postgresql":
        pytest.skip("PERCENTILE_CONT is PostgreSQL's")
    for name, phase, ago in [("r1", "Running", 10 * M), ("r2", "Running", 30 * M), ("r3", "Running", 2 * H),
                             ("r4", "Running", 5 * H), ("f1", "Failed", 90.0)]:
        f.resource(name, "team-a" if name != "r4" else "team-b", phase=phase, since=now - timedelta(seconds=ago))
    f.resource("gone", phase="Running", since=now - timedelta(days=9), deleted=True)  # deleted: not counted
    f.resource("new", phase="", since=now - timedelta(days=9))  # no phase yet: not counted
    f.resource("t", kind=f.TENANT, phase="Running", since=now - timedelta(days=9))  # another kind
    dwell = stats.phase_dwell_now("Memcached", now=now, method=method)
    assert dwell == {
        "Running": {"n": 4, "median": pytest.approx((30 * M + 2 * H) / 2), "max": pytest.approx(5 * H)},
        "Failed": {"n": 1, "median": pytest.approx(90.0), "max": pytest.approx(90.0)},
    }
    team_a = stats.phase_dwell_now("Memcached", now=now, method=method, namespaces=frozenset({"team-a"}))
    assert team_a["Running"] == {"n": 3, "median": pytest.approx(30 * M), "max": pytest.approx(2 * H)}


def test_the_time_in_the_current_phase_reads_the_counts_and_a_few_index_rows_per_phase(now,
                                                                                      django_assert_num_queries):
    for i in range(5):
        f.resource(f"q{i}", phase=("Running", "Pending", "Failed")[i % 3], since=now - timedelta(minutes=i + 1))
    # the counts (one query), then per phase: the rows without an entry time, the middle, the oldest
    with django_assert_num_queries(1 + 3 * 3):
        dwell = stats.phase_dwell_now("Memcached", now=now)
    assert dwell == {"Running": {"n": 2, "median": pytest.approx(150.0), "max": pytest.approx(240.0)},
                     "Pending": {"n": 2, "median": pytest.approx(210.0), "max": pytest.approx(300.0)},
                     "Failed": {"n": 1, "median": pytest.approx(180.0), "max": pytest.approx(180.0)}}


def test_the_time_in_the_current_phase_leaves_out_a_row_with_a_phase_but_no_entry_time(now):
    f.resource("timed", phase="Running", since=now - timedelta(minutes=10))
    f.resource("untimed", phase="Running", phase_since=None)
    assert stats.phase_dwell_now("Memcached", now=now) == {
        "Running": {"n": 1, "median": pytest.approx(600.0), "max": pytest.approx(600.0)}}
