"""The Resource mirror updates the informers handed off, written in batches with their own yield and linger policy.

While keys wait for a worker (`yielding`, at most MIRROR_YIELD_MAX_SECONDS in a row) only new objects and deletions
are written: a refresh of an object this controller has on record waits in the handoff (coalesced per uid), for the
reconciles come first and their records refresh the rows of the objects they reconcile anyway. A new object is not
kept waiting: a run's record in one statement needs its row. Otherwise refreshes wait for
MIRROR_REFRESH_LINGER_SECONDS after the last batch that wrote them, unless a new object or a deletion is written:
then they go with it (at steady load each reconciled object's status echoes cost no transaction of their own).
A batch that fails is written one update at a time, so one bad object does not cost the others their update.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from reconcilers.engine.controller.dbconn import close_old_db_connections
from reconcilers.engine.controller.handoff import Handoff, MirrorUpdate
from reconcilers.engine.controller.yielding import Yielding

log = logging.getLogger(__name__)

#: the mirror's refreshes of objects it has on record yield to the reconciles, for this long at most
MIRROR_YIELD_MAX_SECONDS = 10.0
#: outside a burst, the mirror's refreshes of objects it has on record are written at most once per this many
#: seconds (what waited meanwhile in one batch, coalesced per uid), or with a write that goes anyway (a new object,
#: a deletion)
MIRROR_REFRESH_LINGER_SECONDS = 1.0


class MirrorWriter:
    """Writes the handed-off mirror updates through `write` (one batch per `step`); `busy()`: keys wait for a
    worker (the last depth sample)."""

    def __init__(self, write: Callable[[list[MirrorUpdate]], None], handoff: Handoff, *, batch_size: int,
                 clock: Callable[[], float], busy: Callable[[], bool]) -> None:
        self.write, self.handoff, self.batch_size, self.clock, self.busy = write, handoff, batch_size, clock, busy
        self.yielding = Yielding(MIRROR_YIELD_MAX_SECONDS)
        self.mirrored: set[str] = set()  # uids whose mirror row this controller wrote (live ones)
        self.refresh_at = -float("inf")  # refreshes of objects on record wait until then (a linger)

    @property
    def yields(self) -> int:
        """Rounds the mirror left its refreshes of objects on record waiting (tests and logs)."""
        return self.yielding.rounds

    def step(self) -> bool:
        """Write one batch of the updates handed off (see the module docstring); True when it wrote any."""
        now = self.clock()
        yielding = self.yielding.yields(self.busy(), now)
        leave = None
        if yielding or now < self.refresh_at:
            known = self.mirrored
            leave = lambda update: not update.deleted and update.uid in known  # noqa: E731
        updates = self.handoff.take_mirror(self.batch_size, leave=leave)
        if not updates:
            return False
        if leave is not None and not yielding and len(updates) < self.batch_size:
            updates += self.handoff.take_mirror(self.batch_size - len(updates))  # the refreshes set aside go along
        if not yielding:
            self.refresh_at = now + MIRROR_REFRESH_LINGER_SECONDS
        close_old_db_connections()
        for update in self._write(updates):
            if update.deleted:
                self.mirrored.discard(update.uid)
            else:
                self.mirrored.add(update.uid)
        return True

    def _write(self, updates: list[MirrorUpdate]) -> list[MirrorUpdate]:
        """The batch in one write, else one by one; the updates written."""
        try:
            self.write(updates)
            return updates
        except Exception:  # one bad object must not cost the others their update: write them one by one
            log.warning("controller: mirror batch of %d failed; writing one by one", len(updates), exc_info=True)
        written = []
        for update in updates:
            try:
                self.write([update])
                written.append(update)
            except Exception:
                log.exception("controller: mirror update of %s failed", update.uid)
        return written
