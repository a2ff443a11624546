"""Feed the workqueue's ready keys to Celery workers.

The workqueue (`reconcilers.engine.workqueue`) decides *when* a key must be reconciled; this module sends
the `reconcilers.reconcile` task for it, by name (so it does not import the task module), onto the Celery
queue the app is configured with (`task_default_queue`; the app is `celery.current_app`, which the project makes
`opsconsole.celery.app` as Django starts), never with an ETA or countdown: delays live in the
workqueue's delayed set and `pump()` releases them when due.

Settings read here (all optional): `REDIS_URL`; `OPSCONSOLE_WORKQUEUE_NAME` (default: the Celery queue name,
so a private Celery queue gets a private workqueue); `OPSCONSOLE_WORKQUEUE_LEASE_SECONDS` (30);
`OPSCONSOLE_WORKQUEUE_BACKOFF_BASE` (0.005); `OPSCONSOLE_WORKQUEUE_BACKOFF_CAP` (1000);
`OPSCONSOLE_WORKQUEUE_QPS` (10); `OPSCONSOLE_WORKQUEUE_BURST` (100); `OPSCONSOLE_WORKQUEUE_UNCLAIMED_AFTER` (5: a
key marked sent but not claimed by a worker that long is sent again, the wait doubling per copy up to
`OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER`, 300, the longest wait between copies); `OPSCONSOLE_WORKQUEUE_MAX_SENT`
(32: keys sent and not yet claimed at most; the others wait ready for a draining worker or `pump()`'s top-up; 0
sends one task per ready key).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import redis
from celery import current_app as app
from django.conf import settings

from reconcilers.engine import objectcache
from reconcilers.engine.workqueue import WorkQueue

TASK_NAME = "reconcilers.reconcile"

_lock = threading.Lock()
_queues: dict[tuple[int, str, str], WorkQueue] = {}


def celery_queue() -> str:
    """The Celery queue reconcile tasks are sent to (read at send time, so a test's private queue holds)."""
    return str(app.conf.task_default_queue)


def queue_name() -> str:
    """The workqueue's name: OPSCONSOLE_WORKQUEUE_NAME, else the Celery queue's name."""
    return getattr(settings, "OPSCONSOLE_WORKQUEUE_NAME", "") or celery_queue()


def get_queue() -> WorkQueue:
    """This process's WorkQueue on settings.REDIS_URL (one per process, name and URL: safe after fork)."""
    ident = (os.getpid(), settings.REDIS_URL, queue_name())
    with _lock:
        queue = _queues.get(ident)
        if queue is None:
            unclaimed = float(getattr(settings, "OPSCONSOLE_WORKQUEUE_UNCLAIMED_AFTER", 5.0))
            queue = WorkQueue(
                redis.Redis.from_url(settings.REDIS_URL),
                name=ident[2],
                lease_seconds=float(getattr(settings, "OPSCONSOLE_WORKQUEUE_LEASE_SECONDS", 30.0)),
                backoff_base=float(getattr(settings, "OPSCONSOLE_WORKQUEUE_BACKOFF_BASE", 0.005)),
                backoff_cap=float(getattr(settings, "OPSCONSOLE_WORKQUEUE_BACKOFF_CAP", 1000.0)),
                bucket_qps=float(getattr(settings, "OPSCONSOLE_WORKQUEUE_QPS", 10.0)),
                bucket_burst=int(getattr(settings, "OPSCONSOLE_WORKQUEUE_BURST", 100)),
                redispatch_after=unclaimed,
                redispatch_max=max(unclaimed, float(getattr(settings, "OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER", 300.0))),
                max_sent=max(0, int(getattr(settings, "OPSCONSOLE_WORKQUEUE_MAX_SENT", 32))),
            )
            queue.cache_max_entries = objectcache.max_entries()
            _queues[ident] = queue
        return queue


def dispatch(keys: Iterable[str]) -> int:
    """Send one reconcile task per key (keys the workqueue said to dispatch). Returns how many were sent.
    Each runs only if its key is still queued when it starts (`only_if_queued`): a copy re-sent by
    `reap_expired` for a task that was only waiting in a backlog then costs one Redis call, not a reconcile.
    Sent with `ignore_result` (the task stores none): otherwise Celery's Redis result backend subscribes to each
    task's result channel from a process outside a worker (the controller) and unsubscribes when the unused
    AsyncResult is collected, two Redis round trips per key for nothing."""
    keys = list(keys)
    if not keys:
        return 0
    queue = celery_queue()
    with app.producer_or_acquire() as producer:
        for key in keys:
            app.send_task(TASK_NAME, args=[key], kwargs={"only_if_queued": True}, queue=queue, producer=producer,
                          ignore_result=True)
    return len(keys)


def enqueue(key: str) -> bool:
    """Queue key for a reconcile now; sends the task unless coalesced. True when a task was sent."""
    return dispatch([key]) == 1 if get_queue().add(key) else False


def enqueue_now(key: str) -> bool:
    """Queue key and make sure a task for it is on its way (manual requests): a key already queued but not
    processing is sent again, for its task may have been lost (a copy of one that was only waiting finds nothing
    to claim). Never held for a lingering worker: the task carries the request's trace to the run. False: the key
    is processing, and its run's done() sends it again."""
    queue = get_queue()
    return dispatch([key]) == 1 if queue.add(key, direct=True) or queue.retry_now(key) else False


def enqueue_many(keys: list[str]) -> list[str]:
    """`enqueue` for several keys: one workqueue round trip, one broker connection. Returns the keys newly
    queued (not coalesced): those sent, then those held ready for a draining worker."""
    return _sent_then_held(*get_queue().add_many_queued(keys))


def cache_and_enqueue(entries: dict[str, tuple[str, str | bytes] | None], keys: list[str]) -> list[str]:
    """Store objects in the object cache and `enqueue_many` the keys, in one workqueue round trip (the objects
    first). Returns the keys newly queued: those sent, then those held ready for a draining worker."""
    return _sent_then_held(*get_queue().cache_and_add(entries, keys))


def _sent_then_held(sent: list[str], held: list[str]) -> list[str]:
    """Dispatch the keys the workqueue sent; return them, then those it held ready for a draining worker."""
    dispatch(sent)
    return sent + held


def enqueue_after(key: str, delay: float) -> None:
    """Queue key for a reconcile after delay seconds (released by pump()); delay <= 0 enqueues now."""
    if delay <= 0:
        enqueue(key)
    else:
        get_queue().add_after(key, delay)


def done(key: str, owner: str, *, forget: bool = False, requeue_after: float | None = None,
         hold: bool = False) -> bool:
    """Release owner's lease on key (`forget`: and reset its failure count; `requeue_after`: and queue it again
    after that many seconds) and dispatch the key if it became dirty meanwhile, unless `hold`: the caller drains
    the workqueue next and runs it itself (`WorkQueue.done`). True when sent."""
    sent = get_queue().done(key, owner, forget=forget, requeue_after=requeue_after, hold=hold)
    return dispatch([key]) == 1 if sent else False


def retry_now(key: str) -> bool:
    """Admin: reconcile a delayed/backing-off key now, or re-send a queued key whose task may be lost (stuck in
    "sent"). True when a task was sent."""
    return dispatch([key]) == 1 if get_queue().retry_now(key) else False


def pump() -> int:
    """One step: dispatch due delayed keys, re-queue expired leases, and send ready keys no task was sent for
    while fewer than the cap wait (`WorkQueue.top_up`). Returns the number of tasks sent."""
    return dispatch(get_queue().pump())


def top_up() -> int:
    """Send ready keys no task was sent for, while fewer than the cap wait (a draining task that stops with keys
    left). Returns the number of tasks sent."""
    return dispatch(get_queue().top_up())
