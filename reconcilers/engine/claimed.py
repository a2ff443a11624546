"""A key's lease around its run: claim the key (owner `host:pid:uuid`; someone else holds it → skipped at once: the key
stays dirty, so that owner's `done()` re-queues it), renew the lease while the run goes on
(`lease_renewal.LeaseRenewer`, for Celery's time limit at most: `max_run_seconds`), then release it (`dispatch.done`,
which sends the key again when it changed meanwhile, or, `hold`, leaves it ready for the drain that runs next)."""

from __future__ import annotations

import logging
import uuid

from django.conf import settings

from reconcilers.engine import dispatch
from reconcilers.engine.lease_renewal import LeaseRenewer
from reconcilers.engine.run import Run, worker
from reconcilers.engine.workqueue import Claim, WorkQueue

SKIPPED = "skipped"  # the task's answer when another worker holds the key (not a run: nothing is recorded)

log = logging.getLogger(__name__)


def max_run_seconds() -> float:
    """How long a run's lease is renewed at most: Celery's hard time limit (CELERY_TASK_TIME_LIMIT), which would
    have killed a run in the task's own thread by then."""
    return float(getattr(settings, "CELERY_TASK_TIME_LIMIT", None) or 600)


def owner() -> str:
    """A lease owner: `host:pid:` and a fresh suffix (one per run)."""
    return f"{worker()}:{uuid.uuid4().hex[:8]}"


def run_key(queue: WorkQueue, key: str, *, only_if_queued: bool = False, hold: bool = False) -> str:
    """Claim `key` and run it once; 'skipped' when another worker holds the key or, `only_if_queued`, when the
    workqueue no longer has it queued (a duplicate task: its work was done)."""
    claim = queue.claim(key, owner(), only_if_dirty=only_if_queued)
    if claim is None:
        log.debug("%s is being reconciled elsewhere or no longer queued; skipped", key)
        return SKIPPED
    return run_claimed(queue, claim, hold=hold)


def run_claimed(queue: WorkQueue, claim: Claim, *, hold: bool = False) -> str:
    """One run of a claimed key, its lease renewed meanwhile and released after. A key that became dirty while it
    ran is sent again, or, `hold` (the caller drains the queue next), left ready for the drain: a change to a
    child during the run (its Deployment coming up) costs no Celery message, which the drain would have made
    find nothing."""
    this = execute_claimed(queue, claim, hold=hold)
    release(this, hold=hold)
    return this.result


def execute_claimed(queue: WorkQueue, claim: Claim, *, hold: bool) -> Run:
    """Run a claimed key, its lease renewed meanwhile; the lease is left held (the caller releases it: `release`,
    or the drain's next claim), unless the run raised (then released here, `hold` as `run_claimed` says)."""
    renewer = LeaseRenewer(queue, claim.key, claim.owner, max_run_seconds())
    renewer.start()
    this = Run(claim.key, claim, queue, renewer)
    try:
        this.result = this.execute()
    except BaseException:
        renewer.stop()
        release(this, hold=hold)
        raise
    renewer.stop()
    return this


def release(this: Run, *, hold: bool) -> None:
    """Release a run's lease (`dispatch.done`); a failure is logged: the lease then expires and reap_expired()
    re-queues the key."""
    try:
        dispatch.done(this.key, this.claim.owner, forget=this.forget, requeue_after=this.requeue_after, hold=hold)
    except Exception:
        log.exception("could not release the lease on %s", this.key)
