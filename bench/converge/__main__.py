"""`python -m bench.converge --n 200 [--scenarios opsconsole-1,opsconsole-2,kopf] [--clusters C] [--json out.json]`.

`--clusters C` (default 1) runs each opsconsole scenario also over C clusters at once (N CRs in each; scenario
`opsconsole-K@C`, bench.converge.clusters), alternating with the single-cluster run (no steady phase there); the
report adds each cluster's rate and the operator CPU per CR over the burst against the single-cluster runs'.

Prints the settings, the results table, CPU and peak RSS per process, and the ratios against kopf. Needs
PostgreSQL (`--pg-url`, an admin connection: the bench creates and drops `<db-prefix>_*` databases) and
Redis (`--redis-url`, default db 5; `--flush-redis` empties it before each opsconsole scenario).
Exit status 1 when a scenario failed or did not converge.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .clusters import expand_scenarios
from .report import render
from .scenario import Config, drop_database, prepare_template, run_scenario


def parse_args(argv: list[str] | None = None) -> tuple[Config, str | None]:
    d = Config()
    p = argparse.ArgumentParser(prog="python -m bench.converge", description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=d.n, help="Memcached CRs in the burst")
    p.add_argument("--size", type=int, default=d.size, help="spec.size of each CR")
    p.add_argument("--scenarios", default=None,
                   help="comma-separated: opsconsole-<workers>[@<clusters>] and/or kopf; a name given twice runs "
                   "twice (e.g. A,B,C,C,B,A spreads a changing background load evenly); default "
                   f"{','.join(d.scenarios)}, with --clusters opsconsole-2")
    p.add_argument("--clusters", type=int, default=d.clusters,
                   help="run each opsconsole scenario also over this many clusters (two kubesims, two controllers "
                   "for 2), next to its single-cluster run; burst only")
    p.add_argument("--steady-rate", type=float, default=d.steady_rate, help="CRs/s in the steady phase")
    p.add_argument("--steady-seconds", type=float, default=None,
                   help=f"0 skips the steady phase (default {d.steady_seconds:g}, 0 with --clusters; single-cluster "
                   "scenarios only)")
    p.add_argument("--timeout", type=float, default=d.timeout, help="seconds each phase may take to converge")
    p.add_argument("--startup-timeout", type=float, default=d.startup_timeout)
    p.add_argument("--quiet-timeout", type=float, default=d.quiet_timeout,
                   help="at most this long to wait, after the burst, until no reconcile started for 1.5 s")
    p.add_argument("--creator-threads", type=int, default=d.creator_threads)
    p.add_argument("--schedule-delay", type=float, default=d.schedule_delay, help="kubesim pod delays (s)")
    p.add_argument("--start-delay", type=float, default=d.start_delay)
    p.add_argument("--ready-delay", type=float, default=d.ready_delay)
    p.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", d.pg_url), help="PostgreSQL admin URL")
    p.add_argument("--db-prefix", default=d.db_prefix)
    p.add_argument("--redis-url", default=os.environ.get("BENCH_REDIS_URL", d.redis_url),
                   help="Redis for the opsconsole broker and workqueue (keys are private to the run's queue name)")
    p.add_argument("--flush-redis", action="store_true", help="FLUSHDB the --redis-url database before each "
                   "opsconsole scenario (only on a database of your own)")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("OPSCONSOLE_DATA_DIR", "/tmp/oc-e"))
                   / "bench-converge", help="logs of every process, per scenario")
    p.add_argument("--opsconsole-env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for the opsconsole processes (e.g. OPSCONSOLE_TRACING=off)")
    p.add_argument("--keep", action="store_true", help="keep the scenario databases")
    p.add_argument("--json", default=None, help="also write the raw results here")
    a = p.parse_args(argv)
    extra = dict(item.split("=", 1) for item in a.opsconsole_env)
    steady = a.steady_seconds if a.steady_seconds is not None else (0.0 if a.clusters > 1 else d.steady_seconds)
    given = a.scenarios or (",".join(d.scenarios) if a.clusters == 1 else "opsconsole-2")
    try:
        scenarios = expand_scenarios(tuple(s.strip() for s in given.split(",") if s.strip()), a.clusters)
    except ValueError as exc:
        p.error(str(exc))
    cfg = Config(n=a.n, size=a.size, scenarios=scenarios, clusters=a.clusters,
                 steady_rate=a.steady_rate, steady_seconds=steady, timeout=a.timeout,
                 startup_timeout=a.startup_timeout, quiet_timeout=a.quiet_timeout,
                 creator_threads=a.creator_threads,
                 schedule_delay=a.schedule_delay, start_delay=a.start_delay, ready_delay=a.ready_delay,
                 pg_url=a.pg_url, db_prefix=a.db_prefix, redis_url=a.redis_url, data_dir=a.data_dir,
                 flush_redis=a.flush_redis, opsconsole_env=extra, keep=a.keep)
    return cfg, a.json


def main(argv: list[str] | None = None) -> int:
    cfg, json_path = parse_args(argv)
    cfg.data_dir.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    template = None
    if any(s.startswith("opsconsole-") for s in cfg.scenarios):
        log("preparing the template database (migrate)")
        template = prepare_template(cfg)
    try:
        results = [run_scenario(cfg, name, template, log=log) for name in cfg.scenarios]
    finally:
        if template and not cfg.keep:
            drop_database(cfg, template)
    seen: dict[str, int] = {}
    for r in results:
        seen[r.name] = seen.get(r.name, 0) + 1
        r.label = f"{r.name} #{seen[r.name]}" if cfg.scenarios.count(r.name) > 1 else r.name
    print(render(cfg, results), flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps({"config": {k: str(v) for k, v in vars(cfg).items()},
                                               "results": [r.as_dict() for r in results]}, indent=2))
    ok = all(r.burst is not None and r.burst.converged and not r.error for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
