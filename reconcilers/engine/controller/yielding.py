"""Work of the controller that users do not wait for lets its rounds pass while keys wait for a worker.

In a burst the machine is busy with what users wait for: the reconciles. The Events archive (its owner lookups and
inserts) and the mirror's refreshes of objects already on record (the reconciles' own records refresh those rows
anyway) can come after them. Each yields through a `Yielding`: while keys wait, for at most `max_seconds` in a row;
then it does one round and may yield again. Nothing is dropped: what waits stays in the handoff (coalesced).
"""

from __future__ import annotations


class Yielding:
    """Whether one deferrable piece of the loop's work lets this round pass (`yields`), and how many it did."""

    def __init__(self, max_seconds: float) -> None:
        self.max_seconds = max_seconds
        self.since: float | None = None  # when the present run of yielded rounds began
        self.rounds = 0  # rounds let pass (tests and logs)

    def yields(self, busy: bool, now: float) -> bool:
        """True: let this round pass. `busy`: keys wait for a worker (and the caller's own bound is not reached).
        After `max_seconds` of yielding in a row, one round is not let pass and the count starts again."""
        if not busy or (self.since is not None and now - self.since >= self.max_seconds):
            self.since = None
            return False
        if self.since is None:
            self.since = now
        self.rounds += 1
        return True
