"""The reconcile workqueue, kept in Redis so that every worker on every host shares it.

It has client-go's workqueue semantics (docs/architecture.md), with Celery as the transport for "this key is ready".
Every state change is one Lua script (atomic); all keys live under `wq:{<name>}:` (one hash slot), so several queues
share a Redis. Methods that return keys "to dispatch" leave the sending of the Celery task to the caller
(`reconcilers.engine.dispatch`). One room per concern, each with its Redis keys, its scripts and its methods:

- `lua`: the key layout and the Lua prelude every script shares; `core`: the parameters, keys and the running of a
  script (times from the injected clock or Redis `TIME`);
- `enqueue`: `dirty`, `add`, `add_many`, and the keys sent and ready under `max_sent` (`top_up`);
- `claims`: `processing` and `leases`, `claim`, `claim_next`, `done`, `done_then_claim_next` (`Claim`);
- `leases`: `renew`, and `reap_expired` for lapsed leases and lost tasks (`dispatched`, `resent`);
- `delayed`: `delayed`, `failures`, `bucket`: RequeueAfter, the rate limiter, `release_due`, `retry_now`;
- `lingering`: `lingering`, `wake`: `wait_for_key` (`LingerRefused`);
- `cache`: `objects`, `objects-live`: the object cache's store (`reconcilers.engine.objectcache` reads it);
- `inspection`: `snapshot`, `depths` and the depth history for the console, the API and the metrics;
- `queue`: `WorkQueue`, all of them in one class, and the controller's `pump`.

Import from here: `from reconcilers.engine.workqueue import WorkQueue, Claim`.
"""

from reconcilers.engine.workqueue.claims import Claim
from reconcilers.engine.workqueue.inspection import (
    DEPTH_HISTORY,
    DelayedItem,
    KindDepth,
    PendingItem,
    ProcessingItem,
    QueueSnapshot,
)
from reconcilers.engine.workqueue.lingering import LingerRefused
from reconcilers.engine.workqueue.queue import WorkQueue

__all__ = [
    "DEPTH_HISTORY",
    "Claim",
    "DelayedItem",
    "KindDepth",
    "LingerRefused",
    "PendingItem",
    "ProcessingItem",
    "QueueSnapshot",
    "WorkQueue",
]
