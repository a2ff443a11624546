"""Time to a verified rollback: `python -m bench.healing.rollback_time [--runs 5] [--healing-interval S]`.

Each run creates a Memcached with automatic rollback on (`opsconsole.io/auto-rollback: "true"`) at a good image,
waits until it is Running, patches its image to a tag kubesim never pulls, and measures from the patch to the
`anomaly.detected`, `rollback.started` and `rollback.succeeded` records and to the object reporting Running again
at the restored generation. Prints the settings, each run and the medians. Uses the product's default healing
interval unless `--healing-interval` says otherwise. Exit status 1 when a run did not end in a verified rollback.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from .harness import BROKEN_IMAGE, GOOD_IMAGE, Stack, add_stack_arguments, log, median, stack_config

NAMESPACE = "bench-rollback"


def one_run(stack: Stack, i: int, timeout: float) -> dict[str, float]:
    """One run; {what: seconds after the patch} (NaN for what did not happen within `timeout`)."""
    name = f"rb-{i}"
    uid = stack.create_memcached(NAMESPACE, name)["metadata"]["uid"]
    if not stack.wait_running(NAMESPACE, name, 120):
        raise RuntimeError(f"{name} not Running at its good image within 120 s")
    time.sleep(1.0)  # its first rollout's Events settle
    patched = stack.patch_spec(NAMESPACE, name, {"image": BROKEN_IMAGE})
    t0 = time.time()
    broken_generation = int(patched["metadata"]["generation"])
    out = {"anomaly": math.nan, "started": math.nan, "succeeded": math.nan, "running": math.nan}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (math.isnan(out["succeeded"]) or math.isnan(out["running"])):
        for row in stack.healing_records(uid):
            if row.at < t0 - 1:
                continue
            key = {"anomaly.detected": "anomaly", "rollback.started": "started",
                   "rollback.succeeded": "succeeded"}.get(row.action)
            if key and math.isnan(out[key]):
                out[key] = max(0.0, row.at - t0)
            if row.action in ("rollback.failed", "rollback.refused"):
                raise RuntimeError(f"{name}: {row.action} ({row.detail})")
        if math.isnan(out["running"]) and stack.running_at(NAMESPACE, name, broken_generation + 1):
            out["running"] = time.time() - t0
        stack.alive_or_raise()
        time.sleep(0.05)
    live = stack.get(NAMESPACE, name)
    out["image_restored"] = float(live["spec"].get("image") == GOOD_IMAGE)
    stack.delete(NAMESPACE, name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.healing.rollback_time", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a run may take after the patch")
    add_stack_arguments(p)
    a = p.parse_args(argv)
    cfg = stack_config(a)
    print("time to a verified rollback")
    print(f"  runs: {a.runs}; healing interval: {cfg.interval_shown()}; workers: {cfg.workers}; "
          f"kubesim's default pod delays; good image {GOOD_IMAGE} -> {BROKEN_IMAGE}")
    print(f"  database {cfg.database_url}, redis {cfg.redis_url}")
    results: list[dict[str, float]] = []
    failed = 0
    with Stack(cfg) as stack:
        stack.namespace(NAMESPACE)
        print(f"  {'run':>3}  {'anomaly s':>9}  {'started s':>9}  {'succeeded s':>11}  {'Running again s':>15}")
        for i in range(1, a.runs + 1):
            try:
                r = one_run(stack, i, a.timeout)
            except RuntimeError as exc:
                failed += 1
                print(f"  {i:>3}  failed: {exc}")
                log(str(exc))
                continue
            results.append(r)
            failed += math.isnan(r["succeeded"]) or math.isnan(r["running"]) or not r["image_restored"]
            print(f"  {i:>3}  {r['anomaly']:>9.2f}  {r['started']:>9.2f}  {r['succeeded']:>11.2f}  "
                  f"{r['running']:>15.2f}", flush=True)

    def med(key: str) -> float:
        return median([r[key] for r in results if not math.isnan(r[key])])

    print(f"  med  {med('anomaly'):>9.2f}  {med('started'):>9.2f}  {med('succeeded'):>11.2f}  {med('running'):>15.2f}")
    print(f"  patch -> rollback.succeeded on record, median: {med('succeeded'):.2f} s; "
          f"-> Running again: {med('running'):.2f} s; runs without a verified rollback: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
