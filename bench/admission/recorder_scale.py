"""The admission recorder at 1,000,000 action records on PostgreSQL: decisions written per second (each one the
duplicate check by uid, then the chained insert), with migration 0006's index on `detail -> 'uid'` and, on the same
data, without it (what the recorder did before: a sequential scan of every record's JSON per decision); and a
resource page's admission decisions with migration 0007's partial index on the target and without it.

A database of its own is made (dropped first when it exists: never point it at one you keep), migrated, and
filled with `--rows` action records by COPY, 5 % of them admission decisions; the rows are chained as
`ActionRecord.save` would chain them (`seq`, `prev_hash`, `hash`), so the table is what production holds and
`audit_verify` passes on it. Inserting fires none of the table's triggers (they refuse UPDATE, DELETE and
TRUNCATE), so nothing is disabled.

Run: ``.venv/bin/python -m bench.admission.recorder_scale --database-url postgres://postgres@127.0.0.1:5432/h2bench``
(``--rows 1000000 --decisions 300``; ``--keep`` leaves the database).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
ADMISSION_SHARE = 20  # one row in 20 is an admission decision
INDEX = "actionrecord_detail_uid"
PAGE_INDEX = "actionrecord_admission_target"  # a resource page's admission decisions (migration 0007)


def recreate_database(url: str) -> None:
    import psycopg

    name = urlparse(url).path.lstrip("/")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def fill(rows: int) -> None:
    """`rows` chained action records by COPY (in batches), then ANALYZE."""
    from django.db import connection

    from reconcilers.models import Outcome
    from reconcilers.models.chain import action_hash

    start = datetime(2026, 1, 1, tzinfo=UTC)
    prev = ""
    columns = ("created_at", "actor", "auth", "token_prefix", "action", "method", "path", "target", "reason",
               "outcome", "status_code", "detail", "remote_addr", "seq", "prev_hash", "hash")
    batch = 50_000
    with connection.cursor() as cursor:
        for first in range(1, rows + 1, batch):
            buffer = io.StringIO()
            for seq in range(first, min(rows, first + batch - 1) + 1):
                admission = seq % ADMISSION_SHARE == 0
                row = {
                    "seq": seq, "created_at": start + timedelta(seconds=seq), "actor": "alice" if admission else "bob",
                    "auth": "kubernetes" if admission else "token", "token_prefix": "",
                    "action": "admission.validate" if admission else "resource.reconcile",
                    "method": "UPDATE" if admission else "POST",
                    "path": "/validate/cache.example.com/memcacheds" if admission else "/api/v1/resources/1/reconcile",
                    "target": f"Memcached ns-{seq % 50}/m-{seq}", "reason": "", "outcome": Outcome.ALLOWED.value,
                    "status_code": 200,
                    "detail": ({"uid": str(uuid.uuid4()), "webhook": "validate", "operation": "UPDATE",
                                "kind": "Memcached", "namespace": f"ns-{seq % 50}", "name": f"m-{seq}"}
                               if admission else {"key": f"cache.example.com/v1alpha1/memcacheds/ns/m-{seq}"}),
                    "remote_addr": "10.0.0.1",
                }
                row["prev_hash"] = prev
                row["hash"] = prev = action_hash(row, prev)
                values = [row["created_at"].isoformat(), *(str(row[c]) for c in columns[1:11]),
                          json.dumps(row["detail"]), row["remote_addr"], str(seq), row["prev_hash"], row["hash"]]
                buffer.write("\t".join(v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
                                       for v in values) + "\n")
            with cursor.copy(f"COPY accounts_actionrecord ({', '.join(columns)}) FROM STDIN") as copy:
                copy.write(buffer.getvalue())
            print(f"  {min(rows, first + batch - 1):>9} rows", flush=True)
        cursor.execute("ANALYZE accounts_actionrecord")


def decisions_per_second(count: int) -> float:
    """Write `count` new decisions as the recorder does; decisions per second."""
    from opsconsole.webhooks.recorder import decision_record
    from reconcilers.core.reconciler import AdmissionUser
    from reconcilers.engine.admission import Decision

    made = [Decision("validate", str(uuid.uuid4()), "Memcached", "cache.example.com", "bench", f"b-{i}", "UPDATE",
                     AdmissionUser("alice", ("devs",), "u"), False) for i in range(count)]
    started = time.perf_counter()
    for decision in made:
        assert decision_record(decision, "/validate/cache.example.com/memcacheds") is not None
    return count / (time.perf_counter() - started)


def page_query_ms(count: int) -> float:
    """A resource page's admission decisions (`admission_decisions`, 20 newest) for `count` objects that have
    some; milliseconds per page."""
    from opsconsole.accounts.action_records import admission_decisions

    started = time.perf_counter()
    for i in range(count):
        seq = (i * 7919 % 49_000 + 1) * ADMISSION_SHARE
        admission_decisions("Memcached", f"ns-{seq % 50}", f"m-{seq}")
    return (time.perf_counter() - started) * 1000 / count


def plan() -> str:
    from django.db import connection

    from reconcilers.models import ActionRecord

    query = ActionRecord.objects.filter(action="admission.validate", detail__uid=str(uuid.uuid4()))
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join("    " + r[0] for r in cursor.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/h2bench")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument("--without-decisions", type=int, default=20,
                        help="decisions measured without the index (each scans every row; default 20)")
    parser.add_argument("--pages", type=int, default=200, help="resource pages' admission queries timed")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    os.environ.setdefault("OPSCONSOLE_TRACING", "off")
    print(f"database {args.database_url}: made anew, migrated, {args.rows} action records", flush=True)
    recreate_database(args.database_url)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True,
                   env=os.environ)
    import django

    django.setup()
    from django.db import connection

    started = time.perf_counter()
    fill(args.rows)
    print(f"filled in {time.perf_counter() - started:.0f} s", flush=True)
    with_index = decisions_per_second(args.decisions)
    print(f"with the index ({INDEX}):    {with_index:8.1f} decisions/s  ({1000 / with_index:.2f} ms each)")
    print(plan())
    page = page_query_ms(args.pages)
    print(f"a resource page's admission decisions, with {PAGE_INDEX}: {page:8.2f} ms")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {PAGE_INDEX}")
    page_before = page_query_ms(max(1, args.pages // 10))
    print(f"the same without it (before 0007):                       {page_before:8.2f} ms")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {INDEX}")
    without = decisions_per_second(args.without_decisions)
    print(f"without it (before 0006):  {without:8.1f} decisions/s  ({1000 / without:.1f} ms each)")
    print(plan())
    connection.close()
    if not args.keep:
        import psycopg

        with psycopg.connect(args.database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{urlparse(args.database_url).path.lstrip("/")}" WITH (FORCE)')


if __name__ == "__main__":
    main()
