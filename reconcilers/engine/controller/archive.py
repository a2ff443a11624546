"""The Kubernetes Events archive's step, with its own retry and yield policy (healing.archive writes the rows).

One step archives up to `batch_size` Events the events informer handed off in one write. While the database fails
the batch goes back to the handoff (bounded) and the archive pauses (ARCHIVE_RETRY_MIN doubling to
ARCHIVE_RETRY_MAX); after ARCHIVE_MAX_ATTEMPTS failures in a row the batch is written one Event at a time and what
still fails is dropped. While keys wait for a worker it yields to them (the reconciles users wait for come first: in
a burst the archive's work, its owner lookups on the API server included, would only slow them), for at most
ARCHIVE_YIELD_MAX_SECONDS in a row, and only while the Events waiting are well under the handoff's bound (a long
burst must not make it drop any). On its own thread (`background_step`, background.py) it pauses
ARCHIVE_IDLE_SECONDS unless a full batch waits, so that at a steady trickle the Events go in one INSERT per pause.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.controller.events import DELETED, InformerEvent, controller_owner_uid
from reconcilers.engine.controller.handoff import EventPair, Handoff
from reconcilers.engine.controller.yielding import Yielding

log = logging.getLogger(__name__)

#: the archive thread's pause when no full batch of Events waits (background): at a steady trickle the Events go
#: in one INSERT per pause, not one each
ARCHIVE_IDLE_SECONDS = 0.5
#: the pause after a failed batch (doubling, capped) and the failures before one by one
ARCHIVE_RETRY_MIN = 1.0
ARCHIVE_RETRY_MAX = 30.0
ARCHIVE_MAX_ATTEMPTS = 5
#: the archive yields to the reconciles while keys wait for a worker, for this long at most, and only while fewer
#: Events than a quarter of the handoff's bound wait
ARCHIVE_YIELD_MAX_SECONDS = 10.0


class EventsArchive:
    """Archives the handed-off Events through `write` (rows offered → count); `busy()`: keys wait for a worker.
    A writer with a `resolver` (healing.archive.OwnerResolver) is told whose child each owned object is."""

    def __init__(self, write: Callable[[list[EventPair]], int], handoff: Handoff, *, batch_size: int,
                 clock: Callable[[], float], busy: Callable[[], bool]) -> None:
        self.write, self.handoff, self.batch_size, self.clock, self.busy = write, handoff, batch_size, clock, busy
        self.archived = 0  # rows offered to the archive (tests and logs)
        self.dropped = 0  # Events given up after ARCHIVE_MAX_ATTEMPTS (tests and logs)
        self.failures = 0
        self.retry_at = -float("inf")
        self.yielding = Yielding(ARCHIVE_YIELD_MAX_SECONDS)

    def hint(self, event: InformerEvent, owners: list[ResourceKind]) -> None:
        """Tell the writer's resolver which registered object an owned child belongs to (its controller
        ownerReference, from the informer: no GET when an Event about the child, or about its own children such
        as a Deployment's ReplicaSets, is filed)."""
        resolver: Any = getattr(self.write, "resolver", None)
        if resolver is None or event.type == DELETED or not event.uid:
            return
        owner_uid = controller_owner_uid(event.obj, owners)
        if owner_uid is not None:
            resolver.remember(event.uid, owner_uid)

    def step(self) -> bool:
        """Archive one batch (see the module docstring); True when it did."""
        if self.clock() < self.retry_at or self._yields():
            return False
        taken = self.handoff.take_events(self.batch_size)
        if not taken:
            return False
        try:
            written = self.write([pair for _uid, pair in taken])
        except Exception as exc:
            self.failures += 1
            if self.failures < ARCHIVE_MAX_ATTEMPTS:
                self.handoff.put_events_back(taken)
                pause = min(ARCHIVE_RETRY_MAX, ARCHIVE_RETRY_MIN * 2 ** (self.failures - 1))
                self.retry_at = self.clock() + pause
                log.warning("controller: archiving %d Events failed (%s: %s); kept, retrying in %.0fs", len(taken),
                            type(exc).__name__, exc, pause, exc_info=self.failures == 1)
                return False
            written = self._one_by_one(taken)
        self.failures = 0
        self.retry_at = -float("inf")
        self.archived += written
        return True

    def background_step(self) -> bool:
        """The archive thread's step: archive a batch; True (go again at once) only while a full batch waits."""
        return self.step() and self.handoff.events_pending() >= self.batch_size

    @property
    def yields(self) -> int:
        """Rounds the archive let pass (tests and logs)."""
        return self.yielding.rounds

    def _yields(self) -> bool:
        busy = self.busy() and self.handoff.events_pending() * 4 < self.handoff.max_events
        return self.yielding.yields(busy, self.clock())

    def _one_by_one(self, taken: list[tuple[str, EventPair]]) -> int:
        written, dropped = 0, []
        for uid, pair in taken:
            try:
                written += self.write([pair])
            except Exception:
                log.debug("controller: Event %s not archived", uid, exc_info=True)
                dropped.append(uid)
        if dropped:
            self.dropped += len(dropped)
            log.warning("controller: %d Events not archived after %d attempts, dropped (first: %s)", len(dropped),
                        ARCHIVE_MAX_ATTEMPTS, dropped[0])
        return written
