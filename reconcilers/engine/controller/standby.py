"""The hot standby: a candidate that is not leading keeps its informers listing and watching behind a closed gate,
so that its caches are synced when it acquires the Lease, and at the takeover it hands off only what may need work.

While the gate is closed nothing is routed: no key is enqueued, no object, mirror row or Event is written and no
sweep runs (the leader does all of that). The gate only remembers the events of the last `window` seconds that
came after an informer's first list (the leader saw them too; they matter only if it died before handling them).

At the takeover (`take_over`, under the gate's lock, so no event is routed twice or out of order):
1. the remembered events of the window are routed, in order, as if they had just arrived (whatever the old
   leader had not handed to the workqueue when it died, or changed while nobody led, children included);
2. every cached object of a reconciled kind whose resourceVersion differs from its mirror row's (the last one any
   leader recorded) is handed off with its object and mirror update (it changed while nobody watched it for the
   record); all of them, and every cached child into the object cache, when an informer had not finished its
   first list (what it listed was never routed: a cold start's work);
3. every informer counts as just listed (the mirror and object-cache sweeps run: objects deleted meanwhile);
4. the gate opens: from now on events are routed as they come.
Everything else is left to the periodic resync, which the caller starts at once (spread over one period) rather
than enqueueing every key: the workqueue (Redis) still holds what the old leader had queued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine.controller.events import InformerEvent
from reconcilers.engine.controller.handoff import Handoff, MirrorUpdate
from reconcilers.engine.controller.informer import Informer
from reconcilers.engine.controller.informers import InformerSet
from reconcilers.engine.controller.kindmap import KindMap, kind_id
from reconcilers.engine.controller.routing import EventRouter
from reconcilers.engine.triggers import resync_trigger

log = logging.getLogger(__name__)

#: the standby modes `runcontroller --standby` takes: informers warm while campaigning, or started on acquiring
STANDBY_MODES = ("hot", "cold")
#: events remembered while standing by, at most (beyond, the oldest go: a window of churn, not the history)
MAX_REMEMBERED = 100_000

#: the mirror's last recorded resourceVersion of each live object of a reconciler's kind, by uid
MirrorVersions = Callable[[Reconciler], dict[str, str]]


class StandbyGate:
    """Between the informers and the router of a hot standby (see the module docstring)."""

    def __init__(self, router: EventRouter, handoff: Handoff, kinds: KindMap, informers: InformerSet, *,
                 versions: MirrorVersions | None, mirror: bool, object_cache: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.router, self.handoff, self.kinds, self.informers = router, handoff, kinds, informers
        self.versions, self.mirror, self.object_cache, self.clock = versions, mirror, object_cache, clock
        self.window = 0.0  # set by the controller from the Lease timings
        self.open = False
        self._lock = threading.Lock()
        self._events: deque[tuple[float, bool, InformerEvent]] = deque(maxlen=MAX_REMEMBERED)
        self.replayed = self.changed = 0  # at the last takeover (tests and logs)

    # -- what the informer threads call --------------------------------------------------------------------

    def handle(self, event: InformerEvent) -> None:
        """An event of a watched kind: routed when open, else remembered (after the first list)."""
        self._pass(event, False)

    def handle_event(self, event: InformerEvent) -> None:
        """A core/v1 Event: routed to the archive when open, else remembered."""
        self._pass(event, True)

    def listed(self, informer: Informer) -> None:
        """An informer (re-)listed: the sweep runs only when open (the takeover sweeps every kind)."""
        with self._lock:
            if self.open:
                self.router.listed(informer)

    def _pass(self, event: InformerEvent, archive: bool) -> None:
        with self._lock:
            if self.open:
                (self.router.handle_event if archive else self.router.handle)(event)
                return
            informer = self.informers.events_informer if archive else self.informers.informers.get(
                kind_id(event.kind))
            if informer is None or not informer.synced.is_set():
                return  # the first list: the takeover compares the whole cache with the record instead
            now = self.clock()
            self._events.append((now, archive, event))
            while self._events and self._events[0][0] < now - self.window:
                self._events.popleft()

    # -- the loop's side -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop routing (standing by again); nothing remembered yet."""
        with self._lock:
            self.open = False
            self._events.clear()

    def take_over(self) -> tuple[int, int]:
        """Hand off what may need work and open the gate (see the module docstring); (events replayed, objects
        changed while nobody recorded them)."""
        with self._lock:
            horizon = self.clock() - self.window
            recent = [(archive, event) for at, archive, event in self._events if at >= horizon]
            self._events.clear()
            for archive, event in recent:
                try:
                    (self.router.handle_event if archive else self.router.handle)(event)
                except Exception:  # one bad event must not cost the takeover
                    log.exception("standby: replaying %s %s failed", event.type, event.key)
            # an informer still in its first list: what it listed before now was never routed, so every reconciled
            # object counts as changed and every cached child goes to the object cache (what a cold start does)
            listed = all(informer.synced.is_set() for informer in self.informers.informers.values())
            changed = 0
            for kid, informer in self.informers.informers.items():
                if kid in self.kinds.primary:
                    changed += self._hand_off_changed(kid, informer, everything=not listed)
                elif not listed and self.object_cache and kid in self.kinds.owners_of:
                    for key in informer.keys():
                        obj = informer.get(key)
                        if obj is not None:
                            self.handoff.put_object(key, obj)
            for informer in self.informers.all():
                if informer is not self.informers.events_informer and informer.synced.is_set():
                    self.router.listed(informer)
            self.open = True
        self.replayed, self.changed = len(recent), changed
        log.info("standby: took over with warm caches: %d recent events replayed, %d objects changed since the "
                 "record; the rest is left to the spread resync", len(recent), changed)
        return len(recent), changed

    def _hand_off_changed(self, kid: Any, informer: Informer, *, everything: bool) -> int:
        """Hand off every cached object of this reconciled kind whose resourceVersion is not the mirror's (all of
        them with `everything`); how many."""
        reconciler = self.kinds.reconciler_of.get(kid)
        synced = not everything
        try:
            recorded = self.versions(reconciler) if synced and self.versions is not None and reconciler else None
        except Exception:  # the database away: every object counts as changed (what a cold start does)
            log.warning("standby: the mirror's resourceVersions could not be read; every %s counts as changed",
                        informer.kind.kind, exc_info=True)
            recorded = None
        if recorded is None:
            recorded = {}
        trigger, count = resync_trigger(), 0
        for key in informer.keys():
            obj = informer.get(key)
            if obj is None:
                continue
            meta = obj.get("metadata") or {}
            uid, rv = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
            if uid and recorded.get(uid) == rv:
                continue
            count += 1
            if self.object_cache:  # its entry dropped, not replaced: the store's copy is slim (no managedFields,
                self.handoff.put_object(key, None)  # which provenance reads), so the run GETs the object whole
            self.handoff.put_key(key, trigger)
            if self.mirror and uid:
                self.handoff.put_mirror(MirrorUpdate(informer.kind, uid, obj, False, reconciler))
        return count
