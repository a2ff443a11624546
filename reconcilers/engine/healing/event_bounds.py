"""What an archived Event may claim: its occurrences and times bounded by what the controller itself observed.

An Event's `count`, `firstTimestamp` and `lastTimestamp` are written by whoever created it; anyone who may create
Events in a namespace can write `count: 1000000` and `lastTimestamp: 2099-01-01`. The anomaly rules sum
occurrences within a window of `last_timestamp`, so those two fields, trusted, would raise an anomaly at once and
keep it inside its window forever. The archive therefore files each observation with:

- **occurrences** at most the number of states of the Event the watch delivered since the last archived one:
  the counts above the archived count, up to this one, among the batch's states of that Event and the previous
  states the informer held for them (`observed_occurrences`). An Event first seen at any count is one occurrence
  (two when the informer also saw its previous state); a jump of thousands in one update is one. A real, repeating
  Event (the kubelet bumps `count` once per back-off) is seen at each bump, so it still adds up; a burst that the
  controller saw as one update is undercounted, which can only delay an anomaly, never invent one.
- **times** never later than the controller's clock when it archived the observation (`observed_times`): a
  future `lastTimestamp` is the observation time, so the Event ages out of every window as if it had happened
  when it was seen. An earlier claimed time is kept (it only makes the Event age out sooner, and an Event
  relisted after a restart must not look fresh); `first` is never after `last`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def observed_occurrences(count: int, before: int, seen_counts: Iterable[int]) -> int:
    """Occurrences for an observation at `count`, `before` the highest count archived for that Event (0: none):
    the number of distinct counts in `seen_counts` (the states the watch delivered) in (before, count], at least
    1 and at most `count - before`. 0 when `count` is not above `before` (nothing new)."""
    if count <= before:
        return 0
    seen = {c for c in seen_counts if before < c <= count} | {count}
    return min(count - before, len(seen))


def observed_times(first: datetime | None, last: datetime | None, now: datetime) -> tuple[datetime, datetime]:
    """(first, last) of an observation the controller makes at `now`: neither in the future; a missing `last`
    is `now`; `first` is never after `last`."""
    last = now if last is None or last > now else last
    first = last if first is None or first > last else first
    return first, last
