"""`python -m bench.scale [--n 1000,5000] [--rest-seconds 600] [--project-root [LABEL=]PATH ...] [--json out.json]
[--png docs/benchmarks/scale.png]`.

Prints both tables (see report.py) and writes the chart. Needs PostgreSQL (`--pg-url`, an admin connection: the
bench creates and drops `<db-prefix>_*` databases) and Redis (`--redis-url`, default db 9; `--flush-redis` empties
it before each N: only on a database of your own). `--project-root` may be given more than once (e.g.
`before=/work/wt-scale after=.`): each N then runs on each tree in turn, the trees interleaved. `--from-json` prints
and draws earlier runs' figures together without running anything. Exit status 1 when an N failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from bench.converge.scenario import database_url, drop_database

from .fleet import Config, run_n
from .kinds import KINDS
from .operations import OPERATIONS
from .report import chart, render


def _tree(spec: str) -> tuple[str, Path]:
    label, _, path = spec.rpartition("=")
    root = Path(path).resolve()
    if not (root / "manage.py").exists():
        raise argparse.ArgumentTypeError(f"{root} has no manage.py")
    return re.sub(r"[^a-z0-9_]", "_", (label or root.name).lower()), root


def parse_args(argv: list[str] | None = None) -> tuple[Config, argparse.Namespace]:
    """The Config and the output options."""
    d = Config()
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    p.add_argument("--n", default=",".join(map(str, d.ns)), help="comma-separated fleet sizes")
    p.add_argument("--kind", choices=sorted(KINDS), default=d.kind, help="what is created (bench/scale/kinds.py)")
    p.add_argument("--workers", type=int, default=d.workers, help="the Celery worker's pool processes")
    p.add_argument("--rest-seconds", type=float, default=d.rest_seconds, help="the window at rest")
    p.add_argument("--timeout", type=float, default=d.timeout, help="seconds each wait may take")
    p.add_argument("--startup-timeout", type=float, default=d.startup_timeout)
    p.add_argument("--creator-threads", type=int, default=d.creator_threads)
    p.add_argument("--page-requests", type=int, default=d.page_requests, help="requests per console page")
    p.add_argument("--quiet-seconds", type=float, default=d.quiet_seconds,
                   help="the queue counts as idle once no reconcile started for this long")
    p.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", d.pg_url), help="PostgreSQL admin URL")
    p.add_argument("--db-prefix", default=d.db_prefix)
    p.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", d.redis_url))
    p.add_argument("--flush-redis", action="store_true", help="FLUSHDB --redis-url's database before each N")
    p.add_argument("--data-dir", type=Path, default=d.data_dir, help="every process's logs, per N")
    p.add_argument("--project-root", action="append", type=_tree, default=[], metavar="[LABEL=]PATH",
                   help="the tree whose controller, workers, pages and commands run (default: this one)")
    p.add_argument("--opsconsole-env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for the opsconsole processes")
    p.add_argument("--keep", action="store_true", help="keep the databases")
    p.add_argument("--skip", default="", help="operations after the window to leave out, comma-separated: "
                   "pages, commands, startup, failover (a start-up reconciles all N again: at 50,000 that is "
                   "most of an hour on two cores)")
    p.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    p.add_argument("--png", type=Path, default=None, help="write the chart here")
    p.add_argument("--from-json", type=Path, nargs="+", default=None, help="report earlier runs instead")
    a = p.parse_args(argv)
    cfg = Config(ns=tuple(int(x) for x in a.n.split(",") if x.strip()), kind=a.kind, workers=a.workers,
                 rest_seconds=a.rest_seconds, timeout=a.timeout, startup_timeout=a.startup_timeout,
                 creator_threads=a.creator_threads, page_requests=a.page_requests,
                 quiet_seconds=a.quiet_seconds, pg_url=a.pg_url,
                 db_prefix=a.db_prefix, redis_url=a.redis_url, flush_redis=a.flush_redis, data_dir=a.data_dir,
                 trees=tuple(a.project_root) or d.trees,
                 opsconsole_env=dict(item.split("=", 1) for item in a.opsconsole_env), keep=a.keep,
                 skip=tuple(x.strip() for x in a.skip.split(",") if x.strip()))
    unknown = set(cfg.skip) - set(OPERATIONS)
    if unknown:
        p.error(f"--skip: unknown operations {', '.join(sorted(unknown))} (one of {', '.join(OPERATIONS)})")
    return cfg, a


def prepare_template(cfg: Config, label: str, root: Path) -> str:
    """A database migrated by the tree `root`, which each N's database is cloned from."""
    name = f"{cfg.db_prefix}_{label}_template"
    drop_database(cfg.converge_config(), name)
    with psycopg.connect(cfg.pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    env = {**os.environ, "DATABASE_URL": database_url(cfg.pg_url, name), "DJANGO_SETTINGS_MODULE":
           "opsconsole.settings", "OPSCONSOLE_DATA_DIR": str(cfg.data_dir), "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=root, env=env, check=True)
    return name


def main(argv: list[str] | None = None) -> int:
    """Run (or load) the figures, print the tables, write the chart and the JSON."""
    cfg, a = parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results: list[dict[str, Any]] = []
    if a.from_json:
        for path in a.from_json:
            results += json.loads(path.read_text())["results"]
    else:
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        templates: dict[str, str] = {}
        try:
            for label, root in cfg.trees:
                log(f"migrating the template database of {label} ({root})")
                templates[label] = prepare_template(cfg, label, root)
            for n in cfg.ns:
                for label, root in cfg.trees:
                    results.append(run_n(cfg, label, root, n, templates[label], log))
        finally:
            if not cfg.keep:
                for name in templates.values():
                    drop_database(cfg.converge_config(), name)
    print(render(results), flush=True)
    if a.json:
        a.json.write_text(json.dumps({"config": {k: str(v) for k, v in vars(cfg).items()}, "results": results},
                                     indent=2))
    if a.png:
        chart(results, a.png)
        print(f"chart: {a.png}", flush=True)
    return 1 if any(r.get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
