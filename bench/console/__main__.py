"""Benchmark the console's pages on PostgreSQL: 10,000 resources and 1,000,000 chained transitions by default.

    psql -h 127.0.0.1 -U postgres -c 'create database bench_console'
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_console .venv/bin/python -m bench.console [--reload] [-n 100]
        [--resources 100000 --transitions 10000000]

A size other than the default loads into a database of its own named after it (`bench_console_100k_10m`, created
when missing; see bench/api), so the default size's figures stay reproducible.

The data comes from bench/api's loader (COPY, hashes that verify), with its timeline moved so that it ends now
(the last day then holds ~86k transitions: the overview's edge counts and dwell medians have real work). The
pages are rendered in process through the whole Django stack (session login, middleware, templates) with the
Django test client; p50/p95 of the server time in ms are printed. The engine reads that leave the database
(the Lease, the worker ping, the CRD's printer columns) answer "unreachable" at once: no cluster is configured.

The overview's per-process memo of its edge counts and dwell medians (OPSCONSOLE_OVERVIEW_CACHE_SECONDS) is off
for every row but the last, so those rows time the queries themselves; the last row shows the memo's effect.
After loading, the tables are vacuumed (as autovacuum would after a bulk insert) so index-only scans can be used.

`--runs-last-hour N` adds N reconcile runs spread over the last hour (kept between invocations while their number
matches; their window slides out an hour later, so load them again with `--reload-runs`): the overview's run
charts read the window's runs, so a burst (converging 50,000 objects is 100,000 runs) is what they must survive.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime, timedelta

import bench.api.__main__ as api_bench


def _span() -> timedelta:
    """The loader's timeline: one transition a second, one resource after the other, and the heads after them."""
    return timedelta(seconds=api_bench.RESOURCES * (api_bench.PER_RESOURCE + 1))


class _Shifted(datetime):
    """bench/api's loader starts its timeline at 2026-01-01; this one ends it now."""

    def __new__(cls, *args, **kwargs):  # noqa: ANN204
        if args[:3] == (2026, 1, 1):
            start = datetime.now(UTC) - _span()
            return datetime(start.year, start.month, start.day, start.hour, start.minute, start.second, tzinfo=UTC)
        return datetime(*args, **kwargs)


def measure(client, path: str, n: int) -> tuple[float, float]:
    for _ in range(3):
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reload", action="store_true", help="empty the tables and load the data again")
    parser.add_argument("-n", type=int, default=100, help="requests per page")
    parser.add_argument("--runs-last-hour", type=int, default=0, help="reconcile runs in the last hour (0)")
    parser.add_argument("--reload-runs", action="store_true", help="load the runs of the last hour again")
    api_bench.add_size_arguments(parser)
    args = parser.parse_args()
    api_bench.set_size(args.resources, args.transitions)
    os.environ.setdefault("OPSCONSOLE_DATA_DIR", "/tmp/oc-bench-console")
    os.environ.setdefault("KUBECONFIG", "/nonexistent/kubeconfig")
    api_bench.setup_django()

    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client, override_settings

    from reconcilers.models import Cluster, Resource, Transition

    api_bench.datetime = _Shifted  # the loader's t0
    if args.reload or Resource.objects.count() != api_bench.RESOURCES or \
            Transition.objects.count() != api_bench.RESOURCES * api_bench.PER_RESOURCE:
        api_bench.load()
        with connection.cursor() as c:
            c.execute("VACUUM ANALYZE reconcilers_transition")
            c.execute("VACUUM ANALYZE reconcilers_resource")
    if args.runs_last_hour:
        _load_runs(args.runs_last_hour, args.reload_runs)
    user, _ = User.objects.get_or_create(username="bench-console-operator")
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    middle = Resource.objects.order_by("id").values_list("id", flat=True)[api_bench.RESOURCES // 2]
    cases = [
        ("overview (each kind: edges hour/day, dwell medians; charts)", "/"),
        ("overview live fragments (machines, recent)", "/?_live=machines,recent"),
        ("resources, first page (50, by name)", "/resources/"),
        ("resources, kind+namespace+phase, by time in phase", "/resources/?kind=Memcached&namespace=team-07"
                                                              "&phase=Running&sort=-since"),
        ("resource detail (100 transitions of its chain)", f"/resources/{middle}/"),
        ("audit log, first page", "/audit/"),
    ]
    # issue 41: with a second (empty) cluster registered, the picker narrows to the default one (every row)
    clustered = [
        ("overview fragment: clusters (per cluster, health)", "/?_live=clusters"),
        ("overview narrowed to a cluster (?cluster=default)", "/?cluster=default"),
        ("resources narrowed to a cluster (?cluster=default)", "/resources/?cluster=default"),
        ("audit log narrowed to a cluster (?cluster=default)", "/audit/?cluster=default"),
    ]
    memo = ("overview, memo on (3 s, the default)", "/")
    print(f"PostgreSQL {connection.pg_version}, {Resource.objects.count()} resources, {Transition.objects.count()} "
          f"transitions, {args.runs_last_hour} runs in the last hour, {args.n} requests per page (in-process Django "
          "test client, session login)")
    print(f"{'page':58} {'p50 ms':>8} {'p95 ms':>8}")
    with override_settings(OPSCONSOLE_OVERVIEW_CACHE_SECONDS=0):
        for label, path in cases:
            p50, p95 = measure(client, path, args.n)
            print(f"{label:58} {p50:8.1f} {p95:8.1f}", flush=True)
        other, _ = Cluster.objects.get_or_create(name="bench-other")
        try:
            for label, path in clustered:
                p50, p95 = measure(client, path, args.n)
                print(f"{label:58} {p50:8.1f} {p95:8.1f}", flush=True)
        finally:
            other.delete()
    p50, p95 = measure(client, memo[1], args.n)
    print(f"{memo[0]:58} {p50:8.1f} {p95:8.1f}", flush=True)


def _load_runs(n: int, reload: bool) -> None:
    """`n` runs spread over the last hour (see the module), by COPY into the append-only table (its triggers refuse
    updates and deletes, not inserts); runs loaded before are left where their number already matches."""
    from django.db import connection

    from reconcilers.models import ReconcileRun, Resource

    now = datetime.now(UTC)
    hour = ReconcileRun.objects.filter(started_at__gte=now - timedelta(hours=1))
    if hour.count() >= n and not reload:
        return
    resources = list(Resource.objects.order_by("id").values_list("id", "kind", "namespace", "name")[:n])
    columns = ["key", "cluster", "kind", "resource_id", "started_at", "duration_seconds", "result", "error_class",
               "error_message", "attempt", "worker", "trace_id", "operator_version", "triggers", "triggers_dropped"]

    def rows():  # noqa: ANN202
        for i in range(n):
            rid, kind, namespace, name = resources[i % len(resources)]
            at = now - timedelta(seconds=3600 * (i + 0.5) / n)
            yield (f"cache.example.com/v1alpha1/{kind.lower()}s/{namespace}/{name}", "default", kind, rid, at,
                   0.02 + (i % 97) / 1000, "error" if i % 50 == 0 else "success", "", "", 1, "bench", "", "", "[]", 0)

    with connection.cursor() as c:
        api_bench._copy(c, "reconcilers_reconcilerun", columns, rows())
        c.execute("VACUUM ANALYZE reconcilers_reconcilerun")


if __name__ == "__main__":
    main()
