"""The runner: one run of one key, from taking its lease to releasing it, by whoever owns each part of it.

- `claimed`: the lease around a run (claim, `lease_renewal` while it runs, release: `dispatch.done`);
- `run`: the `Run` itself (read, step, record, complete, queue, telemetry), given a claim;
- `drain`: after its key, a task drains the keys still waiting and lingers for the next one (the Celery task,
  `reconcilers.tasks`, and the worker's signal handlers import it).

`run(key)` is the entry point tests, the `reconcile` command and the benchmarks call; the names below stay
importable from here.
"""

from __future__ import annotations

from reconcilers.engine import dispatch
from reconcilers.engine.annotation_requests import request_annotations
from reconcilers.engine.claimed import (
    SKIPPED,
    execute_claimed,
    max_run_seconds,
    owner,
    release,
    run_claimed,
    run_key,
)
from reconcilers.engine.drain import drain_ready, drain_threads, linger_slots, run_and_drain
from reconcilers.engine.lease_renewal import LeaseRenewer
from reconcilers.engine.run import SUSPENDED, Run, worker

__all__ = [
    "SKIPPED", "SUSPENDED", "LeaseRenewer", "Run", "drain_ready", "drain_threads", "execute_claimed",
    "linger_slots", "max_run_seconds", "owner", "release", "request_annotations", "run", "run_claimed", "worker",
]


def run(key: str, *, only_if_queued: bool = False, drain: bool = False) -> str:
    """Reconcile `key` once. Returns the run's result label, or 'skipped' when another worker holds the key
    or, `only_if_queued`, when the workqueue no longer has it queued (a duplicate task: its work was done).
    Then, `drain`, the keys still waiting in the workqueue (`drain.drain_ready`), in the same task."""
    if drain:
        return run_and_drain(key, only_if_queued=only_if_queued)
    return run_key(dispatch.get_queue(), key, only_if_queued=only_if_queued)
