"""Keep what a long-running process allocated at start-up out of the cyclic garbage collector's reach.

The controller and the Celery workers import Django, the Kubernetes client, Celery and OpenTelemetry: about 140,000
container objects that live as long as the process. CPython's full collection walks every one of them, each time
the young generations have promoted enough survivors. In the controller that happens a few times per burst: the
informer caches grow by thousands of objects a second. Each time it stops every thread for 100–180 ms (measured in
an N=400 `bench.converge` burst: 356 ms in the controller's two full collections, 125 ms in the Celery main
process's one).

`settle()` collects once and then freezes what survives (`gc.freeze`): those objects move to a permanent
generation that collections skip, so a full collection walks only what the process allocated since. Frozen objects
are still freed when their last reference goes (reference counting); only garbage *cycles* among them would wait,
and start-up leaves none behind, because it is collected just before. The process calls `settle()` once its
start-up is done:
- the controller before its loop runs;
- a Celery worker's main process before it forks its pool, so the children inherit the frozen start-up and do not
  copy its pages when a collection touches them;
- each prefork child after its own initialisation.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def settle() -> int:
    """Collect garbage once, then freeze every object that survives (`gc.freeze`). Returns how many objects are
    frozen in this process (`gc.get_freeze_count`). Safe to call again: later calls freeze what was allocated
    since."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("gc: %d start-up objects frozen", frozen)
    return frozen
