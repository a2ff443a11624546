"""Benchmark the API's read paths on PostgreSQL: 10,000 resources and 1,000,000 chained transitions by default.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_api .venv/bin/python -m bench.api [--reload] [-n 200]
        [--resources 100000 --transitions 10000000]

Loads the data once with COPY (hashes computed with `reconcilers.engine.audit.transition_hash`, so the chains
verify), then times requests through the whole Django + DRF stack in process (token auth, cursor pagination,
serialization), for the first page and for a deep page reached by cursor, and prints p50/p95 in ms.

A size other than the default gets a database of its own, named after it (`bench_api` at 100,000 / 10,000,000 is
`bench_api_100k_10m`, created when missing), so the default size's figures stay reproducible.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

RESOURCES = 10_000
PER_RESOURCE = 100  # → 1,000,000 transitions
DEFAULT_RESOURCES, DEFAULT_TRANSITIONS = RESOURCES, RESOURCES * PER_RESOURCE
PHASES = ["Pending", "Running", "Degraded", "Running"]
NAMESPACES = [f"team-{i:02d}" for i in range(20)]


def _short(n: int) -> str:
    for unit, size in (("m", 1_000_000), ("k", 1_000)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def set_size(resources: int, transitions: int) -> None:
    """Set the loader's size (`transitions` a multiple of `resources`: each resource gets the same chain length)."""
    global RESOURCES, PER_RESOURCE
    if resources <= 0 or transitions <= 0 or transitions % resources:
        sys.exit(f"--transitions ({transitions}) must be a positive multiple of --resources ({resources})")
    RESOURCES, PER_RESOURCE = resources, transitions // resources


def sized_database_url(url: str) -> str:
    """`url` for the default size; otherwise its database name with the size appended (`bench_api_100k_10m`)."""
    if (RESOURCES, RESOURCES * PER_RESOURCE) == (DEFAULT_RESOURCES, DEFAULT_TRANSITIONS):
        return url
    base, _, name = url.rpartition("/")
    name, query, params = name.partition("?")
    return f"{base}/{name}_{_short(RESOURCES)}_{_short(RESOURCES * PER_RESOURCE)}{query}{params}"


def _create_database(url: str) -> None:
    """CREATE DATABASE for `url` when it does not exist (a bench_* database only)."""
    import psycopg

    base, _, name = url.rpartition("/")
    name = name.partition("?")[0]
    if not name.startswith("bench_"):
        sys.exit(f"refusing to create {name!r}: the benchmarks use databases named bench_* only")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"created database {name}", flush=True)


def setup_django() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database, e.g. postgres://postgres@127.0.0.1:5432/bench_api")
    sized = sized_database_url(url)
    if sized != url:
        _create_database(sized)
        os.environ["DATABASE_URL"] = sized
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    os.environ.setdefault("OPSCONSOLE_DATA_DIR", "/tmp/oc-bench-api")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _copy(cursor, table: str, columns: list[str], rows) -> None:
    quoted = ", ".join(f'"{c}"' for c in columns)
    with cursor.copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def load() -> None:
    """Empty the tables and COPY RESOURCES resources and RESOURCES × PER_RESOURCE transitions (chained)."""
    import json

    from django.db import connection, transaction

    from reconcilers.engine.audit import HASHED_FIELDS, transition_hash

    started = time.monotonic()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with transaction.atomic(), connection.cursor() as c:  # one transaction: the FKs are checked at commit
        # the bench's own database: the append-only tables' triggers refuse the TRUNCATE that empties them (issue
        # 20); a superuser's session in replica mode fires no ordinary trigger, for this transaction only
        c.execute("SET LOCAL session_replication_role = replica")
        c.execute("TRUNCATE reconcilers_transition, reconcilers_reconcilerequest, reconcilers_reconcilerun, "
                  "reconcilers_anomaly, reconcilers_resource RESTART IDENTITY CASCADE")
        raw = c.cursor
        res_cols = ["uid", "key", "group", "version", "plural", "kind", "namespace", "name", "phase", "phase_since",
                    "reason", "message", "conditions", "generation", "observed_generation", "resource_version",
                    "labels", "owner", "spec", "status", "deleted", "last_transition_seq", "last_transition_hash",
                    "last_result", "created_at", "updated_at", "last_revision_seq", "last_healing_seq",
                    "active_anomalies", "suspended", "anomalies_resolved"]
        heads = []
        resources = []
        for i in range(RESOURCES):
            ns = NAMESPACES[i % len(NAMESPACES)]
            name = f"cache-{i:05d}"
            uid = str(uuid.UUID(int=i + 1))
            resources.append((uid, ns, name))
        trans_cols = ["resource_id", "resource_uid", "kind", "namespace", "name", "seq", "from_phase", "to_phase",
                      "reason", "message", "generation", "resource_version", "actor", "run_id", "trace_id",
                      "created_at", "hash_version", "prev_hash", "hash"]

        def transitions():
            """In time order (seq outer, resource inner), so ids increase with created_at as in production."""
            step = timedelta(seconds=1)
            prev = [""] * len(resources)
            phase = [""] * len(resources)
            for seq in range(1, PER_RESOURCE + 1):
                to = PHASES[(seq - 1) % len(PHASES)]
                for i, (uid, ns, name) in enumerate(resources):
                    at = t0 + step * (seq * RESOURCES + i)
                    fields = {"resource_uid": uid, "kind": "Memcached", "namespace": ns, "name": name, "seq": seq,
                              "from_phase": phase[i], "to_phase": to, "reason": "Bench", "message": "",
                              "generation": 1, "resource_version": str(seq), "actor": "controller", "run_id": None,
                              "trace_id": "", "created_at": at, "resource_id": i + 1, "hash_version": 2}
                    h = transition_hash(fields, prev[i])
                    yield (i + 1, *(fields[k] for k in HASHED_FIELDS), 2, prev[i], h)
                    prev[i], phase[i] = h, to
            heads.extend((prev[i], phase[i], t0 + step * (PER_RESOURCE * RESOURCES + i)) for i in range(len(resources)))

        _copy(raw, "reconcilers_transition", trans_cols, transitions())

        def resource_rows():
            for i, ((uid, ns, name), (h, phase, at)) in enumerate(zip(resources, heads, strict=True)):
                key = f"cache.example.com/v1alpha1/memcacheds/{ns}/{name}"
                yield (uid, key, "cache.example.com", "v1alpha1", "memcacheds", "Memcached", ns, name, phase, at,
                       "Bench", "", json.dumps([{"type": "Ready", "status": "True", "reason": "Bench"}]),
                       1 + (i % 3 == 0), 1, str(i), json.dumps({"app": "memcached", "shard": str(i % 10)}), None,
                       json.dumps({"size": 3}), json.dumps({"phase": phase}), False, PER_RESOURCE, h, "success",
                       t0, at, 0, 0, "{}", False, "{}")

        _copy(raw, "reconcilers_resource", res_cols, resource_rows())
        c.execute("ANALYZE reconcilers_resource")
        c.execute("ANALYZE reconcilers_transition")
    from reconcilers.services.selectors import aggregates

    aggregates.recount(repair=True)  # COPY in replica mode fired no trigger: the maintained counts from the rows
    print(f"loaded {RESOURCES} resources and {RESOURCES * PER_RESOURCE} transitions in "
          f"{time.monotonic() - started:.1f} s", flush=True)


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resources", type=int, default=DEFAULT_RESOURCES, help="resources to load (10,000)")
    parser.add_argument("--transitions", type=int, default=DEFAULT_TRANSITIONS,
                        help="transitions to load, a multiple of --resources (1,000,000)")


def cursor(position: int, reverse: bool = False) -> str:
    """A DRF cursor at `position` (what the `next` link of the page before would carry)."""
    tokens = {"p": str(position)}
    if reverse:
        tokens["r"] = "1"
    return base64.b64encode(urlencode(tokens).encode()).decode()


def measure(client, path: str, n: int, headers: dict[str, str]) -> tuple[float, float]:
    for _ in range(5):  # warm up
        response = client.get(path, headers=headers)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(path, headers=headers)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reload", action="store_true", help="empty the tables and load the data again")
    parser.add_argument("-n", type=int, default=200, help="requests per case")
    add_size_arguments(parser)
    args = parser.parse_args()
    set_size(args.resources, args.transitions)
    setup_django()

    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client

    from opsconsole.accounts.tokens import token_create
    from reconcilers.models import Resource, Transition

    if args.reload or Resource.objects.count() != RESOURCES or Transition.objects.count() != RESOURCES * PER_RESOURCE:
        load()
    user, _ = User.objects.get_or_create(username="bench-viewer")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    headers = {"Authorization": f"Bearer {token_create(user, name='bench').secret}"}
    client = Client(SERVER_NAME="localhost")

    last_resource = Resource.objects.order_by("-id").values_list("id", flat=True).first()
    last_transition = Transition.objects.order_by("-id").values_list("id", flat=True).first()
    cases = [
        ("resources, first page (50)", "/api/v1/resources?page_size=50"),
        ("resources, deep page (100 from the end)",
         f"/api/v1/resources?page_size=50&cursor={cursor(last_resource - 100)}"),
        ("resources, kind+namespace+phase filter", "/api/v1/resources?page_size=50&kind=memcached"
                                                   "&namespace=team-07&phase=Running"),
        ("resources, label selector", "/api/v1/resources?page_size=50&selector=shard%3D3"),
        ("transitions feed, first page (50)", "/api/v1/transitions?page_size=50"),
        ("transitions feed, deep page (id < 1,000)", f"/api/v1/transitions?page_size=50&cursor={cursor(1000)}"),
        ("transitions since= 10,000 from the end",
         f"/api/v1/transitions?page_size=50&since={last_transition - 10000}"),
        ("transitions, namespace filter, first page", "/api/v1/transitions?page_size=50&namespace=team-03"),
    ]
    print(f"PostgreSQL {connection.pg_version}, {RESOURCES} resources, {Transition.objects.count()} transitions, "
          f"{args.n} requests per case (in-process Django test client, token auth)")
    print(f"{'case':48} {'p50 ms':>8} {'p95 ms':>8}")
    for label, path in cases:
        p50, p95 = measure(client, path, args.n, headers)
        print(f"{label:48} {p50:8.1f} {p95:8.1f}", flush=True)


if __name__ == "__main__":
    main()
