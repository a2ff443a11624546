"""The controller: informers per reconciled and owned kind, feeding the workqueue, while it leads.

Written as single steps (healthchecks' `sendalerts` style): `step()` does one round of work and says whether it did any,
so tests drive it step by step and `run()` is only the loop around it. One step: renew or acquire the Lease when due;
start the informers on becoming leader, stop them on losing it (a hot standby, `parts.standby`, runs them behind a
closed gate while it campaigns and on acquiring hands off only what may need work: standby.py); write the objects the
informers reported into the object cache and enqueue the keys they handed off (feed.py, which backs off while the
workqueue is away and asks for a resync when it answers again); write the Resource mirror updates (mirror.py, which
yields and lingers on its own); sweep the mirror and the object cache after every (re-)list (sweep.py); archive the
Kubernetes Events (archive.py, with its own retry and yield policy) and run the healing step every `heal_interval`
(periodic.py) — with `background=True` (as `runcontroller` builds it) these two run on threads of their own
(background.py), so an archive backlog or a slow healing step never holds up enqueueing and the pump; pump the delayed
and expired keys every `pump_interval`; enqueue the keys that the periodic resync spreads over its period (resync.py),
and every cached key at once after a workqueue outage; write a signed audit checkpoint every `checkpoint_seconds`; set
the workqueue gauges every `metrics_interval` (gauges.py); and every CACHE_LIVE_SECONDS, once the informers have listed,
say that the object cache is kept.

The `Controller` receives its collaborators built (`ControllerParts`); `wiring.build_controller` is the
composition root that builds them from settings and test doubles. The informers run in threads (one per kind) and
only talk HTTP and fill their caches; the handlers they call (routing.py) hand keys, mirror updates and Events to
this loop, which alone touches Redis and the database.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from reconcilers.engine.controller.archive import ARCHIVE_IDLE_SECONDS, ARCHIVE_MAX_ATTEMPTS, ARCHIVE_YIELD_MAX_SECONDS
from reconcilers.engine.controller.background import BackgroundStep
from reconcilers.engine.controller.feed import QUEUE_BACKOFF_MAX, QUEUE_BACKOFF_MIN
from reconcilers.engine.controller.gauges import queue_metrics_update
from reconcilers.engine.controller.informer import Informer
from reconcilers.engine.controller.informers import EVENTS
from reconcilers.engine.controller.kindmap import KindId
from reconcilers.engine.controller.leader import LeaderElector
from reconcilers.engine.controller.mirror import MIRROR_REFRESH_LINGER_SECONDS, MIRROR_YIELD_MAX_SECONDS
from reconcilers.engine.controller.parts import ControllerParts
from reconcilers.engine.controller.resync import ResyncSchedule
from reconcilers.engine.triggers import resync_trigger

__all__ = [  # the constants and helpers tests import from here, where they used to live
    "ARCHIVE_MAX_ATTEMPTS", "ARCHIVE_YIELD_MAX_SECONDS", "EVENTS", "MIRROR_REFRESH_LINGER_SECONDS",
    "MIRROR_YIELD_MAX_SECONDS", "QUEUE_BACKOFF_MAX", "QUEUE_BACKOFF_MIN", "Controller", "ControllerParts",
    "queue_metrics_update",
]

log = logging.getLogger(__name__)

#: a loop step slower than this is logged: enqueueing and the release of delayed keys wait for it
SLOW_STEP_SECONDS = 2.0
#: how often a controller whose informers have listed says it keeps the object cache (children are read from the
#: cache only while it does), and for how long each time (a controller killed stops saying so within this)
CACHE_LIVE_SECONDS = 2.0
CACHE_LIVE_TTL = 10.0


class Controller:
    """Informers for the reconcilers of `parts.kinds` (their resource, and the kinds they own), feeding the
    workqueue while `elector` (None: always) says this process leads."""

    def __init__(self, parts: ControllerParts, *, elector: LeaderElector | None = None,
                 clock: Callable[[], float] = time.monotonic, resync_seconds: float = 36000.0,
                 pump_interval: float = 0.2, metrics_interval: float = 1.0, batch_size: int = 500,
                 background: bool = False) -> None:
        self.parts, self.elector, self.clock, self.background = parts, elector, clock, background
        self.kinds, self.handoff, self.informer_set = parts.kinds, parts.handoff, parts.informers
        self.feed, self.gauges = parts.feed, parts.gauges
        self.healing, self.checkpoint = parts.healing, parts.checkpoint
        self.enqueue = parts.feed.enqueue  # the one-key callable a test passed (None: batched)
        self.handle, self.handle_event = parts.router.handle, parts.router.handle_event
        self.resync_seconds, self.pump_interval = resync_seconds, pump_interval
        self.metrics_interval, self.batch_size = metrics_interval, batch_size
        self.running = False
        self.standing_by = False  # a hot standby's informers run behind the closed gate (parts.standby)
        self._standby_synced = False
        self.resyncs = 0  # full resyncs (after a workqueue outage)
        self.resync_schedule = ResyncSchedule(parts.kinds, resync_seconds, lambda: self.informer_set.informers)
        self._threads: list[BackgroundStep] = []  # the archive and the healing step with `background`
        self._next_pump = self._next_metrics = self._next_heal = self._next_cache_live = -float("inf")
        self._next_checkpoint = float("inf")
        self._stop = threading.Event()

    @property
    def informers(self) -> dict[KindId, Informer]:
        """The running informers of the watched kinds (empty while not leading, unless a hot standby)."""
        return self.informer_set.informers

    # -- informers -----------------------------------------------------------------------------------------

    def _start_standby(self) -> None:
        """A hot standby starts its informers behind the closed gate (standby.py) while it campaigns."""
        gate = self.parts.standby
        assert gate is not None
        gate.close()
        if self.elector is not None:  # events older than this were handled by a leader that renewed after them
            gate.window = self.elector.lease_duration + self.elector.renew_deadline
        self.handoff.clear()
        self.informer_set.start(gate.handle, gate.listed, gate.handle_event)
        self.standing_by, self._standby_synced = True, False
        log.info("controller: hot standby, informers listing and watching while campaigning")

    def _start_informers(self) -> None:
        router = self.parts.router
        if self.standing_by:  # warm caches: only what may need work is handed off, the rest to the spread resync
            assert self.parts.standby is not None
            self.standing_by = False
            self.parts.standby.take_over()
        else:
            self.handoff.clear()
            self.informer_set.start(router.handle, router.listed, router.handle_event)
        self._start_work()

    def _start_work(self) -> None:
        if self.background:
            if self.parts.archive is not None:
                self._threads.append(BackgroundStep("archive", self.parts.archive.background_step,
                                                    ARCHIVE_IDLE_SECONDS))
            if self.healing.interval > 0:
                self._threads.append(BackgroundStep("healing", self.healing, self.healing.interval))
            for thread in self._threads:
                thread.start()
        self.running = True
        self.resync_schedule.restart()
        if self.parts.standby is not None:  # every key in its slot within one period from now (synced kinds)
            self.resync_schedule.begin(self.clock())
        self._next_checkpoint = self.clock() + self.checkpoint.seconds

    def _stop_informers(self) -> None:
        if self.parts.standby is not None:
            self.parts.standby.close()
        self.standing_by = False
        self.informer_set.stop()
        for thread in self._threads:
            thread.stop()
        self._threads = []
        led, self.running = self.running, False
        self.handoff.clear()
        if led and self.parts.object_cache and self.kinds.owners_of:  # a standby's say would be the leader's
            self.feed.say_cache_live(None)
            self._next_cache_live = -float("inf")
        log.info("controller: informers stopped")

    def synced(self) -> bool:
        """Whether every informer has completed its first list."""
        return self.running and self.informer_set.synced()

    def wait_synced(self, timeout: float = 10.0) -> bool:
        """Wait until every informer listed once (tests)."""
        return self.informer_set.wait_synced(timeout)

    def cached_keys(self) -> list[str]:
        """Every key in the caches of the reconciled kinds."""
        return self.informer_set.cached_keys()

    # -- one step ------------------------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """Whether this process leads (no elector: always)."""
        return self.elector.is_leader if self.elector is not None else True

    def step(self) -> bool:
        """One round of work; True when it did any."""
        did = False
        if self.elector is not None and self.elector.due():
            self.elector.step()
        leading = self.leading
        if leading and not self.running:
            self._start_informers()
            did = True
        elif not leading and self.running:
            self._stop_informers()
            return True
        if not self.running:
            if self.parts.standby is not None and not self.standing_by and not self._stop.is_set():
                self._start_standby()
                did = True
            elif self.standing_by and not self._standby_synced and self.informer_set.synced():
                self._standby_synced = True
                log.info("controller: hot standby synced, %d keys cached", len(self.cached_keys()))
            return did
        did |= self.feed.enqueue_handed_off(self.batch_size)
        did |= self.parts.mirror.step()
        if not self.background and self.parts.archive is not None:
            did |= self.parts.archive.step()
        did |= self.parts.sweeps.step()
        now = self.clock()
        if not self.background and self.healing.interval > 0 and now >= self._next_heal:
            self._next_heal = now + self.healing.interval
            did |= self.healing()
        if now >= self._next_pump and now >= self.feed.retry_at:
            self._next_pump = now + self.pump_interval
            did |= self.feed.pump_once()
        if self.feed.resync_now:
            did |= self.resync()
        did |= self._resync_due(now)
        if self.checkpoint.seconds > 0 and now >= self._next_checkpoint:
            self._next_checkpoint = now + self.checkpoint.seconds
            did |= self.checkpoint()
        if self.metrics_interval > 0 and now >= self._next_metrics:
            self._next_metrics = now + self.metrics_interval
            self.gauges.update()
        if self.parts.object_cache and self.kinds.owners_of and now >= self._next_cache_live and self.synced():
            self._next_cache_live = now + CACHE_LIVE_SECONDS
            self.feed.say_cache_live(CACHE_LIVE_TTL)
        return did

    def resync(self) -> bool:
        """Enqueue every cached key of the reconciled kinds at once (after a workqueue outage); True when any."""
        self.feed.resync_now = False
        keys = self.resync_schedule.full()
        self.resyncs += 1
        log.info("controller: resync of %d keys", len(keys))
        return self._hand_off(keys)

    def _resync_due(self, now: float) -> bool:
        """Enqueue the keys whose periodic resync slot passed since the last step (resync.py); True when any."""
        keys = self.resync_schedule.due(now)
        if not keys:
            return False
        log.debug("controller: %d keys due for their periodic resync", len(keys))
        return self._hand_off(keys)

    def _hand_off(self, keys: list[str]) -> bool:
        trigger = resync_trigger()
        for key in keys:
            self.handoff.put_key(key, trigger)
        return self.feed.enqueue_handed_off(self.batch_size) or bool(keys)

    def _sleep_budget(self) -> float:
        now = self.clock()
        deadlines = [max(self._next_pump, self.feed.retry_at) if self.running else now + 0.5]
        if self.running and not self.background and self.handoff.events_pending():  # the archive is ours
            deadlines.append(self.parts.archive.retry_at if self.parts.archive is not None else -float("inf"))
        if self.running and self.parts.mirror.refresh_at > now and self.handoff.pending()[1]:  # refreshes linger
            deadlines.append(self.parts.mirror.refresh_at)
        if self.running:
            deadlines.append(self.resync_schedule.next_at())
        if self.elector is not None:
            deadlines.append(self.elector.next_step_at)
        return min(0.5, max(0.0, min(deadlines) - now))

    # -- the loop ------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Step until `request_stop()`; then stop the informers and release the Lease. A step that takes longer
        than SLOW_STEP_SECONDS is logged (enqueueing and the pump wait for it)."""
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                did = self.step()
                took = time.monotonic() - started
                if took > SLOW_STEP_SECONDS:
                    log.warning("controller: a loop step took %.1fs (keys handed off: %d; enqueueing and the pump "
                                "waited)", took, self.handoff.pending()[0])
                if not did:
                    self.handoff.wait(self._sleep_budget())
        finally:
            self.shutdown()

    def request_stop(self) -> None:
        """Ask `run()` to return (safe from a signal handler or another thread)."""
        self._stop.set()
        self.handoff.wake()

    def shutdown(self) -> None:
        """Stop the informers and give the Lease up."""
        if self.running or self.standing_by:
            self._stop_informers()
        if self.elector is not None:
            self.elector.release()

    # -- what tests drive and read: the collaborators' steps and counts ------------------------------------

    def _write_mirror(self) -> bool:
        return self.parts.mirror.step()

    def _archive_events(self) -> bool:
        return self.parts.archive.step() if self.parts.archive is not None else False

    def _archive_step(self) -> bool:
        return self.parts.archive.background_step() if self.parts.archive is not None else False

    def _queue_metrics(self) -> None:
        self.gauges.update()

    def _heal(self) -> bool:
        return self.healing()

    @property
    def heal_interval(self) -> float:
        """Seconds between healing steps (0: none)."""
        return self.healing.interval

    @property
    def checkpoints(self) -> int:
        """Audit checkpoints written."""
        return self.checkpoint.checkpoints

    @property
    def events_archived(self) -> int:
        """Events rows offered to the archive."""
        return self.parts.archive.archived if self.parts.archive is not None else 0

    @property
    def events_dropped(self) -> int:
        """Events given up after ARCHIVE_MAX_ATTEMPTS."""
        return self.parts.archive.dropped if self.parts.archive is not None else 0

    @property
    def archive_yields(self) -> int:
        """Rounds the archive let pass."""
        return self.parts.archive.yields if self.parts.archive is not None else 0

    @property
    def swept(self) -> int:
        """Mirror rows recorded deleted by sweeps."""
        return self.parts.sweeps.swept

    @property
    def mirror_yields(self) -> int:
        """Rounds the mirror left its refreshes of objects on record waiting."""
        return self.parts.mirror.yields

    @property
    def _queue_backoff(self) -> float:
        return self.feed.backoff

    @property
    def _queue_retry_at(self) -> float:
        return self.feed.retry_at

    @property
    def depth_record(self) -> Callable[[int], Any] | None:
        """Where the total depth goes every DEPTH_SAMPLE_SECONDS (None: not recorded)."""
        return self.gauges.depth_record

    @depth_record.setter
    def depth_record(self, record: Callable[[int], Any] | None) -> None:
        self.gauges.depth_record = record
