"""The overview v2 (issue 18): the charts over a window the reader picks (15 min / 1 h / 24 h, validated), in
buckets that fit it, with a clock-time axis, units, gridlines and a legend; runs spread over the window fill
several buckets (one aggregate query, namespaces respected); Prometheus read by one range query per series
with step = the bucket size; the engine strip's counts and links."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from opsconsole.console.charts import WINDOWS, overview_charts, window_get
from opsconsole.console.linechart import line_chart_svg, nice_ticks, time_ticks
from reconcilers.services.metrics_source import DatabaseMetricsSource
from reconcilers.services.selectors import run_charts
from tests.opsconsole.api import factories as f

NOW = datetime(2026, 3, 4, 14, 7, 30, tzinfo=UTC)


def _x_ticks(svg: str) -> list[str]:
    return re.findall(r'class="tick x-tick">([^<]+)<', svg)


def test_the_windows_have_buckets_that_fit_them_and_a_bad_value_falls_back_to_one_hour():
    assert {k: (w.buckets, w.step_label) for k, w in WINDOWS.items()} == {
        "15m": (30, "30 s"), "1h": (60, "1 min"), "24h": (96, "15 min")}
    for bad in (None, "", "2h", "15M", "<script>", "1h; drop"):
        assert window_get(bad).key == "1h"
    assert window_get("24h").key == "24h"


@pytest.mark.parametrize(("key", "ticks"), [
    ("15m", ["13:55", "14:00", "14:05"]),
    ("1h", ["13:15", "13:30", "13:45", "14:00"]),
    ("24h", ["15:00", "18:00", "21:00", "Wed 00:00", "03:00", "06:00", "09:00", "12:00"]),
])
def test_each_window_draws_three_charts_with_clock_time_ticks_units_and_a_legend(db, key, ticks):
    out = overview_charts(window=WINDOWS[key], now=NOW)
    assert out["error"] == "" and out["source"] == "database" and len(out["charts"]) == 3
    rate, errors, time_ = out["charts"]
    for svg, unit in ((rate, "reconciles/s"), (errors, "errors/s"), (time_, "ms")):
        assert _x_ticks(svg) == ticks
        assert f'class="tick axis-unit">{unit}<' in svg
        assert 'viewBox="0 0 1200 230"' in svg and 'width=' not in svg.split(">", 1)[0].replace("viewBox", "")
        assert svg.count('class="grid"') >= 2 and "<desc id=" in svg and "<title id=" in svg
        assert f"over the last {WINDOWS[key].label} in {WINDOWS[key].step_label} buckets" in svg
    assert re.search(r'class="legend line-0">p50<', time_) and re.search(r'class="legend line-1">p99<', time_)
    assert re.search(r'class="legend line-0">reconciles<', rate)


def test_runs_spread_over_the_window_fill_several_buckets_in_one_query(db):
    res = f.resource("spread")
    other = f.resource("elsewhere", "team-b")
    for minutes, result, duration in ((2, "success", 0.1), (2, "error", 0.3), (2, "success", 0.2),
                                      (20, "success", 0.05), (41, "error", 0.5), (59, "success", 1.0)):
        f.run(res, result=result, duration=duration, at=NOW - timedelta(minutes=minutes, seconds=10))
    f.run(other, at=NOW - timedelta(minutes=30, seconds=10))
    f.run(res, at=NOW - timedelta(minutes=61))  # before the window
    start = NOW - timedelta(hours=1)
    with CaptureQueriesContext(connection) as queries:
        rows = run_charts.run_buckets(start, NOW, timedelta(minutes=1), namespaces=frozenset({"default"}))
    assert len(queries) == 1 and len(rows) == 60
    busy = {i: (r["runs"], r["errors"], r["quantiles"][0.5], r["quantiles"][0.99]) for i, r in enumerate(rows)
            if r["runs"]}
    assert busy == {0: (1, 0, 1.0, 1.0), 18: (1, 1, 0.5, 0.5), 39: (1, 0, 0.05, 0.05), 57: (3, 1, 0.2, 0.3)}
    assert rows[0]["start"] == start and rows[1]["start"] == start + timedelta(minutes=1)
    everyone = run_charts.run_buckets(start, NOW, timedelta(minutes=1))
    assert sum(r["runs"] for r in everyone) == 7  # team-b's run too, still not the one before the window
    charts = overview_charts(window=WINDOWS["1h"], now=NOW, source=DatabaseMetricsSource(frozenset({"default"})))
    assert len(re.findall(r'class="point line-0"', charts["charts"][0])) == 60  # a rate per bucket, zeros too
    assert len(re.findall(r'class="point line-0"', charts["charts"][2])) == 4  # a p50 where runs were


def test_prometheus_is_read_with_one_range_query_per_series_stepped_by_the_bucket():
    calls = []

    class Client:
        def custom_query_range(self, query, *, start_time, end_time, step, params):
            calls.append((query, start_time, end_time, step))
            t0 = (NOW - timedelta(minutes=15)).timestamp()
            return [{"metric": {}, "values": [[t0 + 30, "0.5"], [t0 + 90, "NaN"], [t0 + 900, "2"]]}]

    class Prom:
        name = "prometheus"
        timeout = 5.0
        client = Client()

    out = overview_charts(window=WINDOWS["15m"], source=Prom(), now=NOW)
    assert out["error"] == "" and out["source"] == "prometheus"
    assert len(calls) == 4 and {c[3] for c in calls} == {"30s"}
    assert all(c[1] == NOW - timedelta(minutes=15, seconds=-30) and c[2] == NOW for c in calls)
    assert 'result="error"' in calls[1][0] and "histogram_quantile(0.99" in calls[3][0]
    assert len(re.findall(r'class="point line-0"', out["charts"][0])) == 2  # bucket 0 and the last; NaN skipped


def test_a_failing_source_is_reported_not_raised():
    class Broken:
        name = "broken"

        def reconcile_rate(self, *a):
            raise ConnectionError("down")

    out = overview_charts(window=WINDOWS["15m"], source=Broken(), now=NOW)
    assert out["charts"] == [] and "ConnectionError: down" in out["error"]


def test_the_axis_helpers_pick_round_steps_and_clock_times():
    assert nice_ticks(0.53) == [0.0, 0.2, 0.4, 0.6]
    assert nice_ticks(0) == [0.0, 1.0]
    assert [label for _, label in time_ticks(NOW - timedelta(minutes=15), NOW, timedelta(minutes=5))] == [
        "13:55", "14:00", "14:05"]
    svg = line_chart_svg("<b>x</b>", [("a&b", [1.0, None])], unit="ms<", chart_id="c")
    assert "&lt;b&gt;x&lt;/b&gt;" in svg and "a&amp;b" in svg and "ms&lt;" in svg and "<b>" not in svg


def test_the_window_parameter_is_validated_and_kept_by_the_live_charts_fragment(as_role):
    client = as_role("viewer")
    page = client.get("/?window=15m").content.decode()
    assert "Reconciles, last 15 min" in page
    assert re.search(r'<a href="\?window=15m" class="window-link current" data-window="15m" aria-current="true">',
                     page)
    assert '<a href="?window=24h" class="window-link" data-window="24h">' in page
    assert "in 30 s buckets" in page
    bad = client.get("/?window=%3Cscript%3E")
    assert bad.status_code == 200 and "Reconciles, last 1 h" in bad.content.decode()
    live = client.get("/?window=24h&_live=charts").json()["fragments"]["charts"]
    assert 'data-window="24h"' in live and "in 15 min buckets" in live


def test_the_engine_strip_shows_the_queue_leader_workers_and_healing_counts_with_links(as_role):
    f.resource("sick", "default", active_anomalies={"crash_loop": {"since": "2026-01-01T00:00:00+00:00"}})
    f.resource("paused", "default", suspended=True, suspension={"actor": "user:ann", "reason": "upgrade"})
    strip = as_role("viewer").get("/?_live=engine").json()["fragments"]["engine"]
    assert re.search(r'<a href="/queue/" class="depth">0</a> pending', strip)
    assert "processing" in strip and "delayed" in strip
    assert re.search(r'class="workers-count">1<', strip)
    assert "Leader" in strip and ("no controller has led yet" in strip or "did not answer" in strip)
    for key, css, n in (("anomalous", "healing-anomalous", 1), ("suspended", "healing-suspended", 1),
                        ("rolling_back", "healing-rolling-back", 0), ("escalated", "healing-escalated", 0)):
        assert re.search(rf'<a href="/resources/\?healing={key}" class="strip-count[^"]*" id="healing-link-{key}">'
                         rf'<span class="{css}">{n}</span>', strip), key
    assert 'id="healing-counts"' in strip


def test_a_window_s_runs_are_read_from_the_covering_index_alone(db):
    """After a burst (100,000 runs converging 50,000 objects), the charts' query must not visit each run's row:
    the index on started_at carries the duration and the result (PostgreSQL: an index-only scan; SQLite has no
    INCLUDE, and its plan still searches that index)."""
    for minutes in (1, 2, 3):
        f.run(f.resource(f"r{minutes}"), at=NOW - timedelta(minutes=minutes))
    with CaptureQueriesContext(connection) as queries:
        run_charts.run_buckets(NOW - timedelta(hours=1), NOW, timedelta(minutes=1))
    (query,) = queries.captured_queries
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")  # a tiny table: the planner's choice is forced
            cursor.execute(f"EXPLAIN {query['sql']}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "Index Only Scan using run_started_cover" in plan, plan
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {query['sql']}")
            plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
            assert "run_started_cover" in plan, plan
