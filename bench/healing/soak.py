"""False rollbacks soak: `python -m bench.healing.soak [--minutes 30] [--change-every 20] [--broken-every 0]`.

One Memcached with automatic rollback on, whose generation 2 was broken (an unpullable image, rolled back by the
product before the soak starts). During the soak, Warning `BackOff` / `Failed` Events about the Pod of that broken
generation's ReplicaSet keep arriving (posted through the API as a kubelet would: created once, then its count
raised, every `--event-every` seconds), while a valid change is made every `--change-every` seconds (replicas and
the image tag, alternately). Counts the rollbacks of valid generations (false rollbacks; the goal is 0), the
escalations (`rollback.refused` / `rollback.failed`) of valid generations, the anomalies raised, and how many of
the posted Events the archive counted. With `--broken-every K`, every K-th change is a broken image instead; those
should still be rolled back, and are counted apart. Exit status 1 when a valid generation was rolled back.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

from .harness import BROKEN_IMAGE, GOOD_IMAGE, OTHER_GOOD_IMAGE, Stack, add_stack_arguments, log, stack_config

NAMESPACE, NAME = "bench-soak", "soak"


def valid_change(live: dict[str, Any], n: int) -> dict[str, Any]:
    """A change of the live spec that is certainly one (so that it makes a new generation): odd changes toggle
    replicas between 1 and 2, even ones the image between two good tags."""
    spec = live.get("spec") or {}
    if n % 2:
        return {"size": 1 if int(spec.get("size") or 1) != 1 else 2}
    return {"image": GOOD_IMAGE if spec.get("image") != GOOD_IMAGE else OTHER_GOOD_IMAGE}
EVENTS = [("BackOff", f'Back-off pulling image "{BROKEN_IMAGE}"'), ("Failed", "Error: ImagePullBackOff")]


def setup_broken_generation(stack: Stack) -> tuple[str, dict[str, Any], int]:
    """Create the object, break generation 2, and wait for the product to roll it back; (uid, a Pod of the broken
    generation's ReplicaSet, the last healing seq of the setup)."""
    uid = stack.create_memcached(NAMESPACE, NAME)["metadata"]["uid"]
    if not stack.wait_running(NAMESPACE, NAME, 120):
        raise RuntimeError("not Running at its good image within 120 s")
    stack.patch_spec(NAMESPACE, NAME, {"image": BROKEN_IMAGE})
    broken_pod: dict[str, Any] | None = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if broken_pod is None:
            for pod in stack.pods(NAMESPACE):
                images = [c.get("image") for c in (pod.get("spec") or {}).get("containers") or []]
                if BROKEN_IMAGE in images:
                    broken_pod = pod
        records = stack.healing_records(uid)
        if any(r.action == "rollback.succeeded" for r in records) and broken_pod is not None:
            if stack.wait_running(NAMESPACE, NAME, 60, min_generation=3):
                return uid, broken_pod, records[-1].seq
        stack.alive_or_raise()
        time.sleep(0.1)
    raise RuntimeError("the broken generation 2 was not rolled back within 180 s "
                       f"(records: {[r.action for r in stack.healing_records(uid)]})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.healing.soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--change-every", type=float, default=20.0, help="seconds between spec changes")
    p.add_argument("--event-every", type=float, default=5.0,
                   help="seconds between Warning Events about the broken generation's Pod")
    p.add_argument("--broken-every", type=int, default=0, help="every K-th change is a broken image (0: none)")
    add_stack_arguments(p)
    a = p.parse_args(argv)
    cfg = stack_config(a)
    print("false rollbacks soak")
    print(f"  {a.minutes:g} min; a change every {a.change_every:g} s"
          f"{f', every {a.broken_every}th a broken image' if a.broken_every else ', all valid'}; "
          f"a Warning Event about the broken generation's Pod every {a.event_every:g} s; healing interval: "
          f"{cfg.interval_shown()}; workers: {cfg.workers}; kubesim's default pod delays")
    print(f"  database {cfg.database_url}, redis {cfg.redis_url}")
    valid: set[int] = set()
    broken: set[int] = set()
    posted = 0
    with Stack(cfg) as stack:
        stack.namespace(NAMESPACE)
        log("setup: generation 1 good, generation 2 broken, rolled back")
        uid, pod, setup_seq = setup_broken_generation(stack)
        print(f"  setup: generation 2 ({BROKEN_IMAGE}) rolled back; Events about its Pod "
              f"{pod['metadata']['name']} from now on")
        start = time.time()
        end = time.monotonic() + a.minutes * 60
        next_change = time.monotonic() + a.change_every
        next_event = time.monotonic()
        events: dict[str, dict[str, Any] | None] = {reason: None for reason, _ in EVENTS}
        changes = 0
        seen_seq = setup_seq
        active_before = sorted(stack.active_anomalies(uid))
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_event:
                reason, message = EVENTS[posted % len(EVENTS)]
                events[reason] = stack.post_event(pod, reason, message, events[reason])
                posted += 1
                next_event += a.event_every
            if now >= next_change:
                changes += 1
                if a.broken_every and changes % a.broken_every == 0:
                    spec, into = {"image": BROKEN_IMAGE}, broken
                else:
                    spec, into = valid_change(stack.get(NAMESPACE, NAME), changes), valid
                generation = int(stack.patch_spec(NAMESPACE, NAME, spec)["metadata"]["generation"])
                into.add(generation)
                log(f"  {time.time() - start:7.1f} s: generation {generation} {spec}")
                for row in stack.healing_records(uid, seen_seq):
                    seen_seq = row.seq
                    log(f"  {row.at - start:7.1f} s: {row.action} {row.rule} generation {row.generation}"
                        f"{f' -> {row.target_generation}' if row.target_generation else ''}: {row.reason[:160]}")
                next_change += a.change_every
            stack.alive_or_raise()
            time.sleep(max(0.05, min(next_event, next_change) - time.monotonic()))
        time.sleep(5)  # the last change's rollout and healing step
        records = stack.healing_records(uid, setup_seq)
        archived = stack.archived_events_about(pod["metadata"]["uid"], start)
        live = stack.get(NAMESPACE, NAME)
        active_after = sorted(stack.active_anomalies(uid))
    started = [r for r in records if r.action == "rollback.started"]
    false_rollbacks = sorted(r.from_generation for r in started if r.from_generation in valid)
    true_rollbacks = sorted(r.from_generation for r in started if r.from_generation in broken)
    escalated = sorted(r.generation for r in records
                       if r.action in ("rollback.refused", "rollback.failed") and r.generation in valid)
    detected = Counter(r.rule for r in records if r.action == "anomaly.detected")
    cleared = Counter(r.rule for r in records if r.action == "anomaly.cleared")
    print(f"  changes: {len(valid)} valid, {len(broken)} broken; Events posted: {posted}; occurrences the archive "
          f"counted of them: {archived}")
    print(f"  false rollbacks (rollbacks of valid generations): {len(false_rollbacks)} {false_rollbacks or ''}")
    print(f"  escalations of valid generations (rollback.refused / rollback.failed): {len(escalated)} "
          f"{escalated or ''}")
    print(f"  anomalies raised: {sum(detected.values())} {dict(detected) or ''}; cleared: {sum(cleared.values())}; "
          f"active at the start: {active_before or 'none'}, at the end: {active_after or 'none'}")
    for r in started:
        if r.from_generation in valid:
            print(f"    false rollback of generation {r.from_generation} -> spec of {r.target_generation}: "
                  f"{r.reason[:200]}")
    if a.broken_every:
        print(f"  rollbacks of broken changes: {len(true_rollbacks)} of {len(broken)}")
    print(f"  at the end: generation {live['metadata']['generation']}, "
          f"phase {(live.get('status') or {}).get('phase')}, image {live['spec'].get('image')}")
    return 1 if false_rollbacks else 0


if __name__ == "__main__":
    sys.exit(main())
