"""bench/memory: what the controller holds per managed object (issue 40), slim informer caches against full ones.

    python -m bench.memory [--n 1000] [--modes full,slim] [--threads 8] [--redis redis://127.0.0.1:6379/N]

Starts kubesim (a process of its own), builds a fleet of N converged Memcacheds (`fleet.py`: each with its
Deployment, Service, ReplicaSet, Pod and their Events), then, once per mode and each in a fresh process
(`measure.py`), runs the controller `wiring.build_controller` builds, with doubles for Redis and the database, until
its informers have listed everything and the handoffs are drained. `slim` is what the controller runs
(`InformerSet(slim=True)`: slim.py), `full` keeps every object as delivered (the controller before issue 40).

Prints, per managed object (per Memcached): the deep size of each informer cache; the process's RSS growth, as it
is and once the C allocator has given its free memory back, and its peak; and the object cache payload the
controller writes into Redis (`slim`: children's entries slim, the reconciled objects' whole, as the runner reads
their managedFields; `full`: all whole), and with `--redis` what those entries take in Redis (`MEMORY USAGE`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubesim.testing import running_kubesim

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "bench-memory"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="Memcacheds in the fleet (default 1000)")
    parser.add_argument("--modes", default="full,slim", help="comma-separated: full, slim (default both)")
    parser.add_argument("--redis", default="", help="a Redis URL: measure the object cache's entries stored in "
                        "it (scratch hashes, deleted after; default: not measured)")
    parser.add_argument("--threads", type=int, default=8, help="threads converging the fleet (default 8)")
    return parser.parse_args(argv)


def run_mode(kubeconfig: str, mode: str, redis_url: str = "") -> dict[str, Any]:
    """One measurement in a fresh process (measure.py); `redis_url`: measure the object cache in that Redis."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "opsconsole.settings"),
           "BENCH_MEMORY_REDIS_URL": redis_url}
    out = subprocess.run([sys.executable, "-m", "bench.memory.measure", kubeconfig, mode], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def kib(value: float) -> str:
    return f"{value / 1024:.1f}"


def report(results: list[dict[str, Any]], n: int) -> str:
    """The figures per managed object as a Markdown table (KiB per Memcached unless said otherwise)."""
    kinds = list(results[0]["cache_bytes"])
    rows: list[tuple[str, list[str]]] = []
    for kind in kinds:
        rows.append((f"informer cache: {kind} ({results[0]['objects'][kind]} objects)",
                     [kib(r["cache_bytes"][kind] / n) for r in results]))
    rows.append(("**informer caches, total**", [f"**{kib(sum(r['cache_bytes'].values()) / n)}**" for r in results]))
    rows.append(("process RSS growth (after − before the informers)",
                 [kib((r["rss_after_kib"] - r["rss_before_kib"]) * 1024 / n) for r in results]))
    rows.append(("process RSS growth, the allocator's free memory given back (malloc_trim)",
                 [kib((r["rss_trimmed_kib"] - r["rss_before_kib"]) * 1024 / n) for r in results]))
    rows.append(("process RSS peak − before, per object",
                 [kib((r["rss_peak_kib"] - r["rss_before_kib"]) * 1024 / n) for r in results]))
    rows.append(("process RSS before / after / trimmed / peak (MiB)",
                 [f"{r['rss_before_kib'] / 1024:.0f} / {r['rss_after_kib'] / 1024:.0f} / "
                  f"{r['rss_trimmed_kib'] / 1024:.0f} / {r['rss_peak_kib'] / 1024:.0f}" for r in results]))
    rows.append(("object cache payload written to Redis",
                 [kib(sum(r["object_cache_payload"].values()) / n) for r in results]))
    if any(r.get("redis_bytes") for r in results):
        for plural in results[0]["redis_bytes"]:
            rows.append((f"object cache in Redis (MEMORY USAGE): {plural}",
                         [kib(r["redis_bytes"].get(plural, 0) / n) for r in results]))
        rows.append(("**object cache in Redis, total**",
                     [f"**{kib(sum(r['redis_bytes'].values()) / n)}**" for r in results]))
    rows.append(("list and drain (s)", [f"{r['list_seconds']:.1f}" for r in results]))
    lines = [f"| per Memcached, KiB (N = {n}) | " + " | ".join(r["mode"] for r in results) + " |",
             "| --- | " + " | ".join("---:" for _ in results) + " |"]
    lines += [f"| {label} | " + " | ".join(values) + " |" for label, values in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    from bench.memory import fleet
    from reconcilers.engine import kube

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    with running_kubesim(mode="process", history_size=1000) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        print(f"building {args.n} Memcacheds in kubesim ...", flush=True)
        took = fleet.build(api, args.n, NAMESPACE, threads=args.threads, log=lambda line: print(line, flush=True))
        print(f"{args.n} Memcacheds Running in {took:.0f} s", flush=True)
        api.close()
        results = []
        for mode in modes:
            print(f"measuring {mode} ...", flush=True)
            results.append(run_mode(sim.kubeconfig, mode, args.redis))
    print()
    print(report(results, args.n))
    print()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
