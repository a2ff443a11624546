"""The periodic resync, spread over its period: which cached keys are due again without an event.

Every reconciled kind has a period (`Reconciler.resync_seconds`; None: the controller's, OPSCONSOLE_RESYNC_SECONDS,
10 h by default as controller-runtime's SyncPeriod; 0: never). Rather than every key at once, each key has a slot
in the period: at the start of a period the kind's cached keys are taken once and put in a stable order (a hash of
the key, rotated by a phase drawn at random per start, so replicas and restarts do not align), and the i-th of n
keys is due at `(i + 0.5) / n` of the period. A loop step asks `due(now)` and gets the keys whose slot passed since
the last step: O(1) plus the keys returned, never O(N). So over one period every key present for the whole period is
due exactly once, evenly spaced (a step `d` seconds after the last returns at most `n·d/period + 1` keys of a kind);
a key deleted meanwhile is skipped, a key created meanwhile is picked up by the next period (its ADDED event
enqueued it). A key's slot moves only as far as keys before it come and go. Periods skipped by a stalled loop are
not replayed: what the last one left is due at once, and the schedule goes on from the current period.

The first period of a kind starts one period after its informer's first list (which enqueued every key), so a
process that lives less than a period resyncs nothing. `full()` is the other resync, every cached key of every
reconciled kind at once (whatever its period): after a workqueue outage, when a restarted Redis may have lost what
it held. Both count the keys in `opsconsole_resync_keys_total{kind}`.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Callable, Mapping
from threading import Event
from typing import Protocol

from reconcilers.engine import metrics
from reconcilers.engine.controller.kindmap import KindId, KindMap

log = logging.getLogger(__name__)


class KeyCache(Protocol):
    """What the schedule reads of an informer: its keys, whether it still has a key, whether it has listed."""

    synced: Event

    def keys(self) -> list[str]: ...

    def __contains__(self, key: object) -> bool: ...


def periods(kinds: KindMap, default: float) -> dict[KindId, float]:
    """The resync period of every reconciled kind: its reconciler's `resync_seconds`, else `default` (0: never)."""
    out = {}
    for kid in kinds.primary:
        own = getattr(kinds.reconciler_of.get(kid), "resync_seconds", None)
        out[kid] = max(0.0, float(default if own is None else own))
    return out


def key_hash(key: str) -> float:
    """A stable fraction in [0, 1) for a key (the same in every process, unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2.0**64


class KindResync:
    """The spread schedule of one kind: `period` seconds, its keys ordered by their hash rotated by `phase`."""

    def __init__(self, period: float, phase: float) -> None:
        self.period, self.phase = period, phase
        self.origin: float | None = None  # when the first period starts (None: the informer has not listed)
        self.start = 0.0  # the current period's start
        self.order: list[str] | None = None  # the current period's keys in slot order (None: not taken yet)
        self.cursor = 0  # order[:cursor] were due already

    def due(self, now: float, cache: KeyCache | None) -> list[str]:
        """The keys whose slot passed since the last call (first what a period that ended left), still cached."""
        if cache is None or self.period <= 0:
            return []
        if self.origin is None:
            if cache.synced.is_set():
                self.origin = self.start = now + self.period
            return []
        if now < self.start:
            return []
        keys: list[str] = []
        if self.order is None or now >= self.start + self.period:
            keys = self.order[self.cursor:] if self.order is not None else []
            self.start = self.origin + (now - self.origin) // self.period * self.period
            self.order = sorted(cache.keys(), key=lambda k: (key_hash(k) + self.phase) % 1.0)
            self.cursor = 0
        n = len(self.order)
        upto = min(n, max(0, int((now - self.start) * n / self.period + 0.5)))
        keys.extend(self.order[self.cursor:upto])
        self.cursor = max(self.cursor, upto)
        return [k for k in dict.fromkeys(keys) if k in cache]

    def next_at(self) -> float:
        """When the next key is due (inf: never, or the informer has not listed)."""
        if self.origin is None or self.period <= 0:
            return float("inf")
        if self.order is not None and self.cursor < len(self.order):
            return self.start + (self.cursor + 0.5) * self.period / len(self.order)
        return self.start + (self.period if self.order is not None else 0.0)


class ResyncSchedule:
    """The spread resync of every reconciled kind of `kinds` (its period from `periods`), read from the caches
    `caches()` returns (the running informers, by kind). `restart()` when the informers start again: the first
    periods wait for their new lists, and a new phase is drawn (`phase`: a fixed one, tests)."""

    def __init__(self, kinds: KindMap, default_seconds: float, caches: Callable[[], Mapping[KindId, KeyCache]], *,
                 phase: float | None = None) -> None:
        self.kinds, self.caches, self.fixed_phase = kinds, caches, phase
        self.periods = periods(kinds, default_seconds)
        self.labels = {kid: kind.kind for kid, kind in kinds.primary.items()}
        self.counts = dict.fromkeys(self.labels, 0)  # keys due so far, by kind (spread and full)
        for label in self.labels.values():
            metrics.RESYNC_KEYS.labels(label)
        self.schedules: dict[KindId, KindResync] = {}
        self.restart()

    def restart(self) -> None:
        """Start over: every kind waits for its informer's next first list; a new phase."""
        phase = random.random() if self.fixed_phase is None else self.fixed_phase
        self.schedules = {kid: KindResync(period, phase) for kid, period in self.periods.items() if period > 0}

    def begin(self, now: float) -> None:
        """The first period of every kind whose cache has listed starts `now` rather than one period after its
        list (a hot standby's takeover: its caches listed long ago, and what it did not enqueue at once is
        reconciled in its slot within one period from now)."""
        caches = self.caches()
        for kid, schedule in self.schedules.items():
            cache = caches.get(kid)
            if cache is not None and cache.synced.is_set():
                schedule.origin = schedule.start = now

    def due(self, now: float) -> list[str]:
        """The keys of every kind whose slot passed since the last call."""
        caches, keys = self.caches(), []
        for kid, schedule in self.schedules.items():
            order = schedule.order
            kind_keys = schedule.due(now, caches.get(kid))
            if schedule.order is not order:  # a period began
                log.info("controller: %s resync period of %d keys, spread over %.0fs", self.labels[kid],
                         len(schedule.order or ()), schedule.period)
            self._count(kid, len(kind_keys))
            keys.extend(kind_keys)
        return keys

    def full(self) -> list[str]:
        """Every cached key of every reconciled kind, at once (whatever its period)."""
        caches, keys = self.caches(), []
        for kid in self.labels:
            cache = caches.get(kid)
            kind_keys = cache.keys() if cache is not None else []
            self._count(kid, len(kind_keys))
            keys.extend(kind_keys)
        return keys

    def next_at(self) -> float:
        """When the next key of any kind is due (inf: none)."""
        return min((schedule.next_at() for schedule in self.schedules.values()), default=float("inf"))

    def _count(self, kid: KindId, count: int) -> None:
        if count:
            self.counts[kid] += count
            metrics.RESYNC_KEYS.labels(self.labels[kid]).inc(count)
