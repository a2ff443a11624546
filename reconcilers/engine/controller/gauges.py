"""The workqueue gauges the controller reports (the queue is shared by every worker: the controller reports it).

Every `metrics_interval` the loop samples the per-kind depths (`QueueGauges.update`): workqueue_depth, unfinished
work and longest running per controller; every DEPTH_SAMPLE_SECONDS the total depth goes into the queue's depth
history (the console's workers page); and whether keys wait for a worker (`keys_waiting`), which makes the Events
archive and the mirror's refreshes yield (yielding.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reconcilers.core.types import Request
from reconcilers.engine import metrics
from reconcilers.engine.controller.kindmap import KindId

log = logging.getLogger(__name__)

#: how often the workqueue's total depth is sampled into its history (the console's workers page)
DEPTH_SAMPLE_SECONDS = 15.0


def controller_of(key: str, names: dict[KindId, str]) -> str | None:
    """The controller label of a reconcile key (`group/version/plural/namespace/name`), None when not ours
    (or not a reconcile key)."""
    try:
        request = Request.from_key(key)
    except ValueError:
        return None
    return names.get((request.group, request.plural))


def count_add(key: str, names: dict[KindId, str]) -> None:
    """workqueue_adds_total: a key this controller queued (not coalesced)."""
    name = controller_of(key, names)
    if name is not None:
        metrics.WORKQUEUE_ADDS.labels(name, name).inc()


def queue_metrics_update(depths: dict[str, Any], names: dict[KindId, str]) -> None:
    """workqueue_depth, workqueue_unfinished_work_seconds and workqueue_longest_running_processor_seconds per
    controller, from the workqueue's per-kind depths (the queue is shared by every worker: the controller
    reports it). A controller with nothing queued or running reports 0."""
    for (group, plural), name in names.items():
        depth = unfinished = longest = 0.0
        for prefix, kind_depth in depths.items():
            prefix_group, _, rest = prefix.partition("/")
            if prefix_group == group and rest.partition("/")[2] == plural:
                depth += kind_depth.pending
                unfinished += kind_depth.unfinished_seconds
                longest = max(longest, kind_depth.longest_running_seconds)
        metrics.WORKQUEUE_DEPTH.labels(name, name).set(depth)
        metrics.WORKQUEUE_UNFINISHED_WORK.labels(name, name).set(unfinished)
        metrics.WORKQUEUE_LONGEST_RUNNING.labels(name, name).set(longest)


class QueueGauges:
    """The workqueue gauges from `queue_depths()`, the depth history through `depth_record` (None: not recorded),
    and `keys_waiting` as of the last sample."""

    def __init__(self, queue_depths: Callable[[], dict[str, Any]], depth_record: Callable[[int], Any] | None,
                 names: dict[KindId, str], clock: Callable[[], float]) -> None:
        self.queue_depths, self.depth_record, self.names, self.clock = queue_depths, depth_record, names, clock
        self.keys_waiting = False  # keys wait for a worker (the last sample): the archive and the mirror yield
        self._next_depth_sample = -float("inf")

    def update(self) -> None:
        """The gauges from the per-kind depths (a failure is logged at debug: metrics never keep the loop busy);
        every DEPTH_SAMPLE_SECONDS the total depth goes into the queue's depth history too."""
        try:
            depths = self.queue_depths()
            queue_metrics_update(depths, self.names)
            self.keys_waiting = any(int(getattr(d, "pending", 0)) > 0 for d in depths.values())
            now = self.clock()
            if self.depth_record is not None and now >= self._next_depth_sample:
                self._next_depth_sample = now + DEPTH_SAMPLE_SECONDS
                self.depth_record(sum(int(getattr(d, "pending", 0)) for d in depths.values()))
        except Exception:
            log.debug("controller: workqueue metrics not updated", exc_info=True)
