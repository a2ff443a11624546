"""The controller: informers per reconciled and owned kind, event filters, owner mapping, periodic resync
and leader election, feeding the workqueue (docs/architecture.md, the processes).

- `events`: what an informer reports and which events enqueue (pure functions).
- `informer`: list + watch of one kind with resume, re-list on 410 and a cache.
- `handoff`: the thread-safe handoff from informer threads to the loop.
- `leader`: leader election through a coordination.k8s.io/v1 Lease.
- `loop`: the `Controller`, written as single steps.
- `yielding`: deferrable work (the Events archive, mirror refreshes) lets its rounds pass in a burst.
- `bootstrap`: `runcontroller --bootstrap` (CRDs, then samples, create-if-missing).
"""

from reconcilers.engine.controller.events import RECONCILE_REQUESTED_AT, InformerEvent
from reconcilers.engine.controller.informer import Informer
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME, LeaderElector
from reconcilers.engine.controller.loop import Controller

__all__ = [
    "LEASE",
    "LEASE_NAME",
    "RECONCILE_REQUESTED_AT",
    "Controller",
    "Informer",
    "InformerEvent",
    "LeaderElector",
]
