"""The controller: informers per reconciled and owned kind, event filters, owner mapping, periodic resync
and leader election, feeding the workqueue (docs/architecture.md, the processes).

- `events`: what an informer reports and which events enqueue (pure functions).
- `informer`: list + watch of one kind with resume, re-list on 410 and a cache.
- `handoff`: the thread-safe handoff from informer threads to the loop.
- `leader`: leader election through a coordination.k8s.io/v1 Lease.
- `loop`: the `Controller`, written as single steps; it receives its collaborators built (`parts`).
- `wiring`: the composition root: `build_controller` builds the collaborators from settings and the backends
  (`adapters`: the workqueue, the object cache, recording, checkpoints, the Events archive) or a test's doubles;
  `leader_elector` builds the Lease's elector from settings.
- `kindmap`: which kinds are reconciled, which owned, and by whom.
- `informers`: the informers of one controller, started and stopped with leadership; `routing`: what their
  threads call, into the handoff; `standby`: the gate in front of the router while a hot standby campaigns, and
  what its takeover hands off.
- `feed`: objects into the object cache and keys into the workqueue, the pump, the backoff while Redis is away;
  `gauges`: the workqueue gauges and the depth history.
- `mirror`: the Resource mirror writer (its yield and linger); `sweep`: the sweeps after each (re-)list.
- `archive`: the Events archive step (its retry and yield); `periodic`: the healing step and the audit checkpoint.
- `background`: a step on a supervised thread of its own (the archive, the healing step under `runcontroller`).
- `yielding`: deferrable work (the Events archive, mirror refreshes) lets its rounds pass in a burst.
- `dbconn`: a broken or expired database connection dropped before use.
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
