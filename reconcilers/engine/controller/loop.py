"""The controller: informers per reconciled and owned kind, feeding the workqueue, while it leads.

Written as single steps (healthchecks' `sendalerts` style): `step()` does one round of work and says whether it did
any, so tests drive it step by step and `run()` is only the loop around it. One step: renew or acquire the Lease
when due; start the informers on becoming leader, stop them on losing it; write the objects of the reconciled and
owned kinds the informers reported into the object cache the workers read (reconcilers.engine.objectcache; deleted
ones out), then enqueue the keys the informer threads handed off (dispatch.enqueue_many: one Redis round trip for
the batch), and every CACHE_LIVE_SECONDS, once the informers have listed, say that the cache is kept;
write the Resource mirror updates (recording.resource_mirror_write: one transaction for the batch; an object found
deleted gets its deletion recorded in it, recording.resource_deletions_record; while keys wait for a worker, the
refreshes of objects already on record wait, up to MIRROR_YIELD_MAX_SECONDS at a time: yielding.py); after every
(re-)list of a reconciled kind, record as deleted the mirror's live rows the cluster no longer has
(recording.resource_mirror_sweep: objects deleted while no controller watched) and prune the object cache entries
the (re-)list of a reconciled or owned kind no longer has;
pump the delayed and expired keys (dispatch.pump) every `pump_interval`; enqueue every cached key every
`resync_seconds`; archive the Kubernetes Events the events informer handed off (healing.archive: one INSERT per
batch; while the database fails, the batch is kept and retried with a growing pause, and after ARCHIVE_MAX_ATTEMPTS
failures written one by one, dropping only what still fails; while keys wait for a worker it yields to them, up to
ARCHIVE_YIELD_MAX_SECONDS at a time); run the healing step every `heal_interval`
(healing.evaluator: anomaly rules, rollbacks, expired suspensions) — with `background=True` (as `runcontroller`
builds it) these two run on threads of their own (background.py), so an archive backlog or a slow healing step never
holds up enqueueing and the pump; set the workqueue gauges (depth, unfinished work, longest running) from a queue
depth count every `metrics_interval`. While the workqueue (Redis) cannot be reached, enqueues and pumps back off
exponentially (`QUEUE_BACKOFF_MIN` doubling to `QUEUE_BACKOFF_MAX`) and the keys are kept: the loop neither spins
nor logs a traceback per step. When it answers again, a resync follows at once: a Redis that restarted without
persistence lost every queued key, and nothing else would bring them back before the next resync.

The informers run in threads (one per kind) and only talk HTTP and fill their caches; the handler they call filters
the event (events.py) and hands keys, mirror updates and Events to this loop, which alone touches Redis and the
database.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.types import Request
from reconcilers.engine import metrics
from reconcilers.engine.controller.background import BackgroundStep
from reconcilers.engine.controller.events import (
    DELETED,
    InformerEvent,
    child_changed,
    controller_owner_uid,
    owner_keys,
    primary_wants_reconcile,
)
from reconcilers.engine.controller.handoff import EventPair, Handoff, MirrorSweep, MirrorUpdate
from reconcilers.engine.controller.informer import Informer
from reconcilers.engine.controller.leader import LeaderElector
from reconcilers.engine.controller.yielding import Yielding

log = logging.getLogger(__name__)

KindId = tuple[str, str]  # (group, plural)

#: the pause before the next enqueue or pump after one failed (the workqueue's Redis away): doubling, capped
QUEUE_BACKOFF_MIN = 0.1
QUEUE_BACKOFF_MAX = 5.0
#: the pause before a mirror sweep that failed (the database away) is tried again
SWEEP_RETRY_SECONDS = 5.0
#: a loop step slower than this is logged: enqueueing and the release of delayed keys wait for it
SLOW_STEP_SECONDS = 2.0
#: how often the workqueue's total depth is sampled into its history (the console's workers page)
DEPTH_SAMPLE_SECONDS = 15.0
#: the archive thread's pause when no full batch of Events waits (Controller(background=True)): at a steady trickle
#: the Events go in one INSERT per pause, not one each
ARCHIVE_IDLE_SECONDS = 0.5
#: the Events archive: the pause after a failed batch (doubling, capped) and the failures before one by one
ARCHIVE_RETRY_MIN = 1.0
ARCHIVE_RETRY_MAX = 30.0
ARCHIVE_MAX_ATTEMPTS = 5
#: the archive yields to the reconciles while keys wait for a worker (a burst: the machine is busy with what users
#: wait for), for this long at most, and only while fewer Events than a quarter of the handoff's bound wait
ARCHIVE_YIELD_MAX_SECONDS = 10.0
#: the mirror's refreshes of objects it has on record yield to the reconciles the same way, for this long at most
MIRROR_YIELD_MAX_SECONDS = 10.0
#: outside a burst, the mirror's refreshes of objects it has on record are written at most once per this many
#: seconds (what waited meanwhile in one batch, coalesced per uid), or with a write that goes anyway (a new object,
#: a deletion): at steady load each reconciled object's status echoes cost no transaction of their own
MIRROR_REFRESH_LINGER_SECONDS = 1.0
#: how often a controller whose informers have listed says it keeps the object cache (children are read from the
#: cache only while it does), and for how long each time (a controller killed stops saying so within this)
CACHE_LIVE_SECONDS = 2.0
CACHE_LIVE_TTL = 10.0
#: what the events informer watches (core/v1: kubelet, controllers and the runner post these)
EVENTS = ResourceKind("", "v1", "events", "Event", True)
#: how a deletion seen by a watch is described in its transitions' message
DELETED_EVENT = "deleted from the cluster (the controller saw it go)"


def _kind_id(kind: ResourceKind) -> KindId:
    return (kind.group, kind.plural)


def default_resync_seconds() -> float:
    """settings.OPSCONSOLE_RESYNC_SECONDS (default 300)."""
    from django.conf import settings

    return float(getattr(settings, "OPSCONSOLE_RESYNC_SECONDS", 300))


def default_checkpoint_seconds() -> float:
    """settings.OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS (default 300; 0: none)."""
    from django.conf import settings

    return float(getattr(settings, "OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS", 300))


def default_archive_events() -> bool:
    """settings.OPSCONSOLE_EVENT_ARCHIVE (default on)."""
    from django.conf import settings

    return bool(getattr(settings, "OPSCONSOLE_EVENT_ARCHIVE", True))


def _default_events_writer(api: Any) -> Callable[[list[EventPair]], int]:
    """healing.archive.events_archive with an OwnerResolver of this controller's (its cache lives as long)."""
    from reconcilers.engine.healing.archive import OwnerResolver, events_archive

    resolver = OwnerResolver(api)

    def write(batch: list[EventPair]) -> int:
        _close_old_db_connections()
        return events_archive(batch, resolver)

    write.resolver = resolver  # type: ignore[attr-defined]
    return write


def _default_heal_interval(mirror: bool) -> float:
    """settings.OPSCONSOLE_HEALING_INTERVAL when the controller writes the mirror (healing reads it), else 0."""
    if not mirror:
        return 0.0
    from reconcilers.engine.healing.evaluator import default_interval

    return default_interval()


def _default_checkpoint_write(api: Any) -> Any:
    from reconcilers.engine.checkpoint import checkpoint_write

    _close_old_db_connections()
    return checkpoint_write(api)


def _default_enqueue_many(keys: list[str]) -> list[str]:
    from reconcilers.engine import dispatch

    return dispatch.enqueue_many(keys)


def _cache_entries(objects: dict[str, dict[str, Any] | None]) -> dict[str, tuple[str, bytes] | None]:
    """The objects as object-cache entries (`reconcilers.engine.objectcache`); None removes a deleted one."""
    from reconcilers.engine import objectcache

    return {key: objectcache.encode(obj) if obj is not None else None for key, obj in objects.items()}


def _default_cache_write(objects: dict[str, dict[str, Any] | None]) -> None:
    """The objects into the object cache (`reconcilers.engine.objectcache`), deleted ones out of it."""
    from reconcilers.engine import dispatch

    dispatch.get_queue().cache_objects(_cache_entries(objects))


def _default_cache_and_enqueue(objects: dict[str, dict[str, Any] | None], keys: list[str]) -> list[str]:
    """`_default_cache_write` and `_default_enqueue_many` in one workqueue round trip (objects first)."""
    from reconcilers.engine import dispatch

    return dispatch.cache_and_enqueue(_cache_entries(objects), keys)


def _default_cache_prune(prefix: str, present: list[str]) -> None:
    from reconcilers.engine import dispatch

    dispatch.get_queue().cache_prune(prefix, present)


def _default_cache_live(ttl: float | None) -> None:
    from reconcilers.engine import dispatch

    dispatch.get_queue().cache_live(ttl)


def _default_object_cache() -> bool:
    from reconcilers.engine import objectcache

    return objectcache.enabled()


def _default_pump() -> int:
    from reconcilers.engine import dispatch

    return dispatch.pump()


def _default_mirror_write(updates: list[MirrorUpdate]) -> None:
    """The batch, atomically: live objects upserted (one statement on PostgreSQL), deleted ones recorded deleted
    (their kind's reconciler known) or only marked deleted."""
    from django.db import transaction

    from reconcilers.engine import recording

    gone = [recording.Deletion(u.reconciler, u.uid, u.obj, DELETED_EVENT) for u in updates
            if u.deleted and u.reconciler is not None]
    # live objects only (the usual batch): one statement on PostgreSQL, which needs no transaction around it
    with transaction.atomic() if any(u.deleted for u in updates) else nullcontext():
        recording.resource_mirror_write([(u.kind, u.obj) for u in updates if not u.deleted],
                                        [u.uid for u in updates if u.deleted and u.reconciler is None])
        recording.resource_deletions_record(gone)


def _default_mirror_sweep(reconciler: Reconciler, present: set[str], namespace: str | None,
                          listed_at: Any) -> list[str]:
    from reconcilers.engine import recording

    return recording.resource_mirror_sweep(reconciler, present, namespace=namespace, listed_at=listed_at)


def _default_depth_record(depth: int) -> None:
    from reconcilers.engine import dispatch

    dispatch.get_queue().record_depth(depth, time.time())


def _default_queue_depths() -> dict[str, Any]:
    from reconcilers.engine import dispatch

    return dispatch.get_queue().depths()


def _controller_of(key: str, names: dict[KindId, str]) -> str | None:
    """The controller label of a reconcile key (`group/version/plural/namespace/name`), None when not ours
    (or not a reconcile key)."""
    try:
        request = Request.from_key(key)
    except ValueError:
        return None
    return names.get((request.group, request.plural))


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


def _close_old_db_connections() -> None:
    """Drop a broken or expired DB connection before using it (a long-running process must)."""
    try:
        from django.db import close_old_connections, connection

        if not connection.in_atomic_block:  # never inside a transaction (e.g. a test's)
            close_old_connections()
    except Exception:
        log.debug("could not check DB connections", exc_info=True)


class Controller:
    """Informers for `reconcilers` (their resource, and the kinds they own), feeding the workqueue."""

    def __init__(
        self,
        api: Any,
        reconcilers: Sequence[Reconciler],
        *,
        elector: LeaderElector | None = None,
        enqueue: Callable[[str], bool] | None = None,
        pump: Callable[[], int] | None = None,
        mirror_write: Callable[[list[MirrorUpdate]], None] | None = None,
        mirror_sweep: Callable[[Reconciler, set[str], str | None, Any], list[str]] | None = None,
        mirror: bool = True,
        resync_seconds: float | None = None,
        pump_interval: float = 0.2,
        batch_size: int = 500,
        informer_options: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        queue_depths: Callable[[], dict[str, Any]] | None = None,
        metrics_interval: float = 1.0,
        checkpoint_seconds: float | None = None,
        checkpoint_write: Callable[[Any], Any] | None = None,
        archive_events: bool | None = None,
        events_write: Callable[[list[EventPair]], int] | None = None,
        heal_interval: float | None = None,
        heal: Callable[[], Any] | None = None,
        background: bool = False,
        object_cache: bool | None = None,
        cache_write: Callable[[dict[str, dict[str, Any] | None]], Any] | None = None,
        cache_prune: Callable[[str, list[str]], Any] | None = None,
        cache_live: Callable[[float | None], Any] | None = None,
    ) -> None:
        self.api = api
        self.reconcilers = list(reconcilers)
        self.elector = elector
        # `enqueue` (one key → sent?) replaces the batched default, for tests
        self.enqueue = enqueue
        self.enqueue_many: Callable[[list[str]], list[str]] = (
            _default_enqueue_many if enqueue is None else (lambda keys: [k for k in keys if enqueue(k)]))
        self.pump = pump or _default_pump
        # the object cache the workers read (objectcache): written before the keys of the same batch are enqueued
        # (tests that fake the enqueue without a cache writer get none)
        self.object_cache = ((enqueue is None or cache_write is not None) and _default_object_cache()
                             if object_cache is None else object_cache)
        self.cache_write = cache_write or _default_cache_write
        # both defaults: the objects and the keys they make dirty go in one round trip
        self.cache_and_enqueue: Callable[[dict[str, dict[str, Any] | None], list[str]], list[str]] | None = (
            _default_cache_and_enqueue if enqueue is None and cache_write is None else None)
        self.cache_prune = cache_prune or _default_cache_prune
        self.cache_live = cache_live or _default_cache_live
        self._next_cache_live = -float("inf")
        self.mirror = mirror
        self.mirror_write = mirror_write or _default_mirror_write
        self.mirror_sweep = mirror_sweep or _default_mirror_sweep
        self.swept = 0  # mirror rows recorded deleted by sweeps (for tests and logs)
        self._sweep_retry_at = -float("inf")
        self.resync_seconds = default_resync_seconds() if resync_seconds is None else resync_seconds
        self.pump_interval = pump_interval
        self.batch_size = batch_size
        self.informer_options = dict(informer_options or {})
        self.clock = clock
        self.queue_depths = queue_depths or _default_queue_depths
        # the depth history the workers page draws (None: not recorded; tests that fake the depths pass none)
        self.depth_record: Callable[[int], Any] | None = _default_depth_record if queue_depths is None else None
        self._next_depth_sample = -float("inf")
        self.metrics_interval = metrics_interval
        self._next_metrics = -float("inf")
        # signed audit checkpoints (reconcilers.engine.checkpoint), written only while leading
        self.checkpoint_seconds = default_checkpoint_seconds() if checkpoint_seconds is None else checkpoint_seconds
        self.checkpoint_write = checkpoint_write or _default_checkpoint_write
        self._next_checkpoint = float("inf")
        self.checkpoints = 0
        # the Kubernetes Events archive (None: OPSCONSOLE_EVENT_ARCHIVE, when the controller writes the mirror)
        self.archive_events = (self.mirror and default_archive_events()) if archive_events is None else archive_events
        self.events_write: Callable[[list[EventPair]], int] | None = events_write
        if self.archive_events and self.events_write is None:
            self.events_write = _default_events_writer(api)
        self.events_informer: Informer | None = None
        self.events_archived = 0  # rows offered to the archive (tests and logs)
        self.events_dropped = 0  # Events given up after ARCHIVE_MAX_ATTEMPTS (tests and logs)
        self._archive_failures = 0
        self._archive_retry_at = -float("inf")
        self._keys_waiting = False  # keys wait for a worker (the last depth sample): the archive and the mirror yield
        self._archive_yield = Yielding(ARCHIVE_YIELD_MAX_SECONDS)
        self._mirror_yield = Yielding(MIRROR_YIELD_MAX_SECONDS)
        self._mirrored: set[str] = set()  # uids whose mirror row this controller wrote (live ones)
        self._mirror_refresh_at = -float("inf")  # refreshes of objects on record wait until then (a linger)
        # self-healing (reconcilers.engine.healing.evaluator): anomaly rules, rollbacks, expiries, while leading
        self.heal_interval = _default_heal_interval(self.mirror) if heal_interval is None else heal_interval
        self.heal = heal
        self._next_heal = -float("inf")
        self.heals = 0
        # the archive and the healing step on threads of their own (runcontroller), else inline in step() (tests)
        self.background = background
        self._threads: list[BackgroundStep] = []

        # which kinds are reconciled, which are owned, and by whom
        self.primary: dict[KindId, ResourceKind] = {}
        self.reconciler_of: dict[KindId, Reconciler] = {_kind_id(r.resource): r for r in self.reconcilers}
        self.controller_names: dict[KindId, str] = {_kind_id(r.resource): r.name for r in self.reconcilers}
        self.owners_of: dict[KindId, list[ResourceKind]] = {}
        self.kinds: dict[KindId, ResourceKind] = {}
        for rec in self.reconcilers:
            self.primary[_kind_id(rec.resource)] = rec.resource
            self.kinds.setdefault(_kind_id(rec.resource), rec.resource)
            for child in rec.owns:
                owners = self.owners_of.setdefault(_kind_id(child), [])
                if rec.resource not in owners:
                    owners.append(rec.resource)
                self.kinds.setdefault(_kind_id(child), child)

        self.handoff = Handoff()
        self.informers: dict[KindId, Informer] = {}
        self.running = False
        self.enqueued = 0  # keys handed to enqueue() (for tests and logs)
        self.resyncs = 0
        self._next_pump = -float("inf")
        self._next_resync = float("inf")
        self._queue_backoff = 0.0  # > 0 while the workqueue fails: the current pause
        self._queue_retry_at = -float("inf")  # no enqueue or pump before this
        self._resync_now = False  # set when the workqueue answers again after failing
        self._stop = threading.Event()

    # -- what informer threads call ------------------------------------------------------------------------

    def _lookup_owner(self, owner: ResourceKind, uid: str) -> str | None:
        informer = self.informers.get(_kind_id(owner))
        return informer.key_for_uid(uid) if informer is not None and uid else None

    def handle(self, event: InformerEvent) -> None:
        """Filter one informer event into keys to enqueue and a mirror update (any thread)."""
        kid = _kind_id(event.kind)
        if kid in self.primary:
            if self.object_cache and event.key:  # before its key: the loop writes the objects, then enqueues
                self.handoff.put_object(event.key, None if event.type == DELETED else event.obj)
            if primary_wants_reconcile(event):
                self.handoff.put_key(event.key)
            if self.mirror and event.uid:
                self.handoff.put_mirror(MirrorUpdate(event.kind, event.uid, event.obj, event.type == DELETED,
                                                     self.reconciler_of.get(kid)))
        owners = self.owners_of.get(kid)
        if owners:
            self._hint_archive(event, owners)
            if self.object_cache and kid not in self.primary and event.key:  # a child: before its owner's key
                self.handoff.put_object(event.key, None if event.type == DELETED else event.obj)
            if child_changed(event):
                for key in sorted(owner_keys(event, owners, self._lookup_owner)):
                    self.handoff.put_key(key)

    def _hint_archive(self, event: InformerEvent, owners: list[ResourceKind]) -> None:
        """Tell the Events archive's resolver which registered object an owned child belongs to (its controller
        ownerReference, from the informer: no GET when an Event about the child, or about its own children such
        as a Deployment's ReplicaSets, is filed)."""
        resolver = getattr(self.events_write, "resolver", None)
        if resolver is None or event.type == DELETED or not event.uid:
            return
        owner_uid = controller_owner_uid(event.obj, owners)
        if owner_uid is not None:
            resolver.remember(event.uid, owner_uid)

    def handle_event(self, event: InformerEvent) -> None:
        """An informer event of core/v1 Events: handed to the archive (any thread). A deletion is not: the
        archive keeps what Kubernetes lets expire."""
        if event.type != DELETED and event.uid:
            self.handoff.put_event(event.uid, (event.obj, event.old))

    def _listed(self, informer: Informer) -> None:
        """An informer completed a list (informer thread): a reconciled kind's mirror and object cache, and an owned
        kind's object cache, are swept in the loop."""
        kid = _kind_id(informer.kind)
        if informer.listed_at is not None and (((self.mirror or self.object_cache) and kid in self.primary)
                                               or (self.object_cache and kid in self.owners_of)):
            self.handoff.put_sweep(MirrorSweep(kid, informer.listed_at))

    # -- informers -----------------------------------------------------------------------------------------

    def _start_informers(self) -> None:
        self.handoff.clear()
        # owner kinds first, so their caches (uid -> key) fill before the children's events arrive
        order = sorted(self.kinds, key=lambda kid: kid not in self.primary)
        self.informers = {
            kid: Informer(self.api, self.kinds[kid], self.handle, on_listed=self._listed, **self.informer_options)
            for kid in order
        }
        if self.archive_events:
            self.events_informer = Informer(self.api, EVENTS, self.handle_event, **self.informer_options)
        for informer in self._all_informers():
            informer.start()
        if self.background:
            if self.archive_events:
                self._threads.append(BackgroundStep("archive", self._archive_step, ARCHIVE_IDLE_SECONDS))
            if self.heal_interval > 0:
                self._threads.append(BackgroundStep("healing", self._heal, self.heal_interval))
            for thread in self._threads:
                thread.start()
        self.running = True
        self._next_resync = self.clock() + self.resync_seconds
        self._next_checkpoint = self.clock() + self.checkpoint_seconds
        log.info("controller: informers started for %s", ", ".join(f"{g or 'core'}/{p}" for g, p in order))

    def _all_informers(self) -> list[Informer]:
        return [*self.informers.values(), *([self.events_informer] if self.events_informer is not None else [])]

    def _stop_informers(self) -> None:
        informers = self._all_informers()
        for informer in informers:  # end all watches first, then wait for the threads
            informer.signal_stop()
        for informer in informers:
            informer.stop()
        for thread in self._threads:
            thread.stop()
        self._threads = []
        self.running = False
        self.events_informer = None
        self.handoff.clear()
        if self.object_cache and self.owners_of:
            self._say_cache_live(None)
            self._next_cache_live = -float("inf")
        log.info("controller: informers stopped")

    def synced(self) -> bool:
        """Whether every informer has completed its first list."""
        return self.running and all(inf.synced.is_set() for inf in self.informers.values())

    def wait_synced(self, timeout: float = 10.0) -> bool:
        """Wait until every informer listed once (tests)."""
        deadline = time.monotonic() + timeout
        for informer in list(self.informers.values()):
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def cached_keys(self) -> list[str]:
        """Every key in the caches of the reconciled kinds."""
        keys: list[str] = []
        for kid in self.primary:
            informer = self.informers.get(kid)
            if informer is not None:
                keys.extend(informer.keys())
        return keys

    # -- one step ------------------------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
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
            return did
        did |= self._enqueue_handed_off()
        did |= self._write_mirror()
        if not self.background:
            did |= self._archive_events()
        did |= self._sweep_mirror()
        now = self.clock()
        if not self.background and self.heal_interval > 0 and now >= self._next_heal:
            self._next_heal = now + self.heal_interval
            did |= self._heal()
        if now >= self._next_pump and now >= self._queue_retry_at:
            self._next_pump = now + self.pump_interval
            try:
                did |= bool(self.pump())
            except Exception as exc:
                self._queue_failed("pump", exc)
            else:
                self._queue_recovered()
        if self._resync_now or (self.resync_seconds > 0 and now >= self._next_resync):
            did |= self.resync()
        if self.checkpoint_seconds > 0 and now >= self._next_checkpoint:
            self._next_checkpoint = now + self.checkpoint_seconds
            did |= self._checkpoint()
        if self.metrics_interval > 0 and now >= self._next_metrics:
            self._next_metrics = now + self.metrics_interval
            self._queue_metrics()
        if self.object_cache and self.owners_of and now >= self._next_cache_live and self.synced():
            self._next_cache_live = now + CACHE_LIVE_SECONDS
            self._say_cache_live(CACHE_LIVE_TTL)
        return did

    def _say_cache_live(self, ttl: float | None) -> None:
        """Tell the workers that this controller's informers keep the object cache (None: no longer). Not counted
        as work; a failure only means that runs apply their children for a while."""
        try:
            self.cache_live(ttl)
        except Exception:
            log.debug("controller: object cache liveness not written", exc_info=True)

    def _heal(self) -> bool:
        """One healing step (reconcilers.engine.healing.evaluator); the keys it names are enqueued with the
        others. A failure is logged; the next step comes on time."""
        if self.heal is None:
            from reconcilers.engine.healing.evaluator import Evaluator

            self.heal = Evaluator(self.api, self.reconcilers, annotations=self._cached_annotations,
                                  enqueue=self.handoff.put_keys).step
        _close_old_db_connections()
        try:
            report = self.heal()
        except Exception:
            log.warning("controller: the healing step failed", exc_info=True)
            return False
        self.heals += 1
        return bool(getattr(report, "did", False))

    def _cached_annotations(self, reconciler: Reconciler, resource: Any) -> dict[str, Any] | None:
        """An object's annotations from its kind's informer cache (None when not cached)."""
        informer = self.informers.get(_kind_id(reconciler.resource))
        obj = informer.get(resource.key) if informer is not None else None
        return ((obj or {}).get("metadata") or {}).get("annotations") or {} if obj is not None else None

    def _checkpoint(self) -> bool:
        """Write a signed checkpoint of the audit record (a failure is logged; the next one comes on time)."""
        try:
            self.checkpoint_write(self.api)
        except Exception:
            log.warning("controller: could not write an audit checkpoint", exc_info=True)
            return False
        self.checkpoints += 1
        return True

    def _queue_metrics(self) -> None:
        """The workqueue gauges from the per-kind depths (not counted as work: metrics never keep the loop busy);
        every DEPTH_SAMPLE_SECONDS the total depth goes into the queue's depth history too (the workers page)."""
        try:
            depths = self.queue_depths()
            queue_metrics_update(depths, self.controller_names)
            self._keys_waiting = any(int(getattr(d, "pending", 0)) > 0 for d in depths.values())
            now = self.clock()
            if self.depth_record is not None and now >= self._next_depth_sample:
                self._next_depth_sample = now + DEPTH_SAMPLE_SECONDS
                self.depth_record(sum(int(getattr(d, "pending", 0)) for d in depths.values()))
        except Exception:
            log.debug("controller: workqueue metrics not updated", exc_info=True)

    def _queue_failed(self, what: str, exc: Exception) -> None:
        """A workqueue call failed: pause enqueues and pumps (exponential backoff); the traceback once per outage."""
        first = self._queue_backoff == 0.0
        self._queue_backoff = min(QUEUE_BACKOFF_MAX, max(QUEUE_BACKOFF_MIN, self._queue_backoff * 2))
        self._queue_retry_at = self.clock() + self._queue_backoff
        log.warning("controller: %s failed (%s: %s); %d keys kept, retrying in %.1fs", what, type(exc).__name__,
                    exc, self.handoff.pending()[0], self._queue_backoff, exc_info=first)

    def _queue_recovered(self) -> None:
        if self._queue_backoff:
            log.info("controller: the workqueue answers again; resyncing (what it held may be lost)")
            self._resync_now = True
        self._queue_backoff, self._queue_retry_at = 0.0, -float("inf")

    def _enqueue_handed_off(self) -> bool:
        if self.clock() < self._queue_retry_at:
            return False  # backing off: the keys stay in the handoff
        objects, keys = self.handoff.take_objects_and_keys(self.batch_size)  # each key's object is among them
        if not keys and not objects:
            return False
        try:
            if objects and self.cache_and_enqueue is not None:
                added = self.cache_and_enqueue(objects, keys)
            else:
                if objects:
                    self.cache_write(objects)
                added = self.enqueue_many(keys) if keys else []
        except Exception as exc:  # a cache write and an add are idempotent: the whole batch is tried again
            self.handoff.put_objects_back(objects)
            self.handoff.put_keys(keys)
            self._queue_failed("enqueue", exc)
            return False
        self._queue_recovered()
        self.enqueued += len(keys)
        for key in added:
            self._count_add(key)
        return True

    def _count_add(self, key: str) -> None:
        """workqueue_adds_total: a key this controller queued (not coalesced)."""
        name = _controller_of(key, self.controller_names)
        if name is None:
            return
        metrics.WORKQUEUE_ADDS.labels(name, name).inc()

    def _write_mirror(self) -> bool:
        """Write the mirror updates handed off, in one batch. While keys wait for a worker (`yielding`, at most
        MIRROR_YIELD_MAX_SECONDS in a row) only new objects and deletions are written: a refresh of an object this
        controller has on record waits in the handoff (coalesced per uid), for the reconciles come first and their
        records refresh the rows of the objects they reconcile anyway. A new object is not kept waiting: a run's
        record in one statement needs its row. Otherwise refreshes wait for MIRROR_REFRESH_LINGER_SECONDS after the
        last batch that wrote them, unless a new object or a deletion is written: then they go with it."""
        now = self.clock()
        yielding = self._mirror_yield.yields(self._keys_waiting, now)
        leave = None
        if yielding or now < self._mirror_refresh_at:
            known = self._mirrored
            leave = lambda update: not update.deleted and update.uid in known  # noqa: E731
        updates = self.handoff.take_mirror(self.batch_size, leave=leave)
        if not updates:
            return False
        if leave is not None and not yielding and len(updates) < self.batch_size:
            updates += self.handoff.take_mirror(self.batch_size - len(updates))  # the refreshes set aside go along
        if not yielding:
            self._mirror_refresh_at = now + MIRROR_REFRESH_LINGER_SECONDS
        _close_old_db_connections()
        try:
            self.mirror_write(updates)
            written = updates
        except Exception:  # one bad object must not cost the others their update: write them one by one
            log.warning("controller: mirror batch of %d failed; writing one by one", len(updates), exc_info=True)
            written = []
            for update in updates:
                try:
                    self.mirror_write([update])
                    written.append(update)
                except Exception:
                    log.exception("controller: mirror update of %s failed", update.uid)
        for update in written:
            if update.deleted:
                self._mirrored.discard(update.uid)
            else:
                self._mirrored.add(update.uid)
        return True

    def _archive_events(self) -> bool:
        """Archive up to `batch_size` Events in one write. On failure the batch goes back to the handoff (bounded)
        and the archive pauses (ARCHIVE_RETRY_MIN doubling to ARCHIVE_RETRY_MAX); after ARCHIVE_MAX_ATTEMPTS
        failures in a row the batch is written one Event at a time and what still fails is dropped."""
        if not self.archive_events or self.events_write is None or self.clock() < self._archive_retry_at:
            return False
        if self._archive_yields():
            return False
        taken = self.handoff.take_events(self.batch_size)
        if not taken:
            return False
        try:
            written = self.events_write([pair for _uid, pair in taken])
        except Exception as exc:
            self._archive_failures += 1
            if self._archive_failures < ARCHIVE_MAX_ATTEMPTS:
                self.handoff.put_events_back(taken)
                pause = min(ARCHIVE_RETRY_MAX, ARCHIVE_RETRY_MIN * 2 ** (self._archive_failures - 1))
                self._archive_retry_at = self.clock() + pause
                log.warning("controller: archiving %d Events failed (%s: %s); kept, retrying in %.0fs", len(taken),
                            type(exc).__name__, exc, pause, exc_info=self._archive_failures == 1)
                return False
            written = self._archive_one_by_one(taken)
        self._archive_failures = 0
        self._archive_retry_at = -float("inf")
        self.events_archived += written
        return True

    def _archive_step(self) -> bool:
        """The archive thread's step: archive a batch; True (go again at once) only while a full batch waits, so
        that at a steady trickle the Events wait ARCHIVE_IDLE_SECONDS and go in one INSERT."""
        return self._archive_events() and self.handoff.events_pending() >= self.batch_size

    def _archive_yields(self) -> bool:
        """Whether the archive lets this round pass (`yielding`): keys wait for a worker (the reconciles users wait
        for come first: in a burst the archive's work, its owner lookups on the API server included, would only slow
        them), for at most ARCHIVE_YIELD_MAX_SECONDS in a row, and only while the Events waiting are well under the
        handoff's bound (a long burst must not make it drop any)."""
        busy = self._keys_waiting and self.handoff.events_pending() * 4 < self.handoff.max_events
        return self._archive_yield.yields(busy, self.clock())

    @property
    def archive_yields(self) -> int:
        """Rounds the archive let pass (tests and logs)."""
        return self._archive_yield.rounds

    @property
    def mirror_yields(self) -> int:
        """Rounds the mirror left its refreshes of objects on record waiting (tests and logs)."""
        return self._mirror_yield.rounds

    def _archive_one_by_one(self, taken: list[tuple[str, EventPair]]) -> int:
        assert self.events_write is not None
        written, dropped = 0, []
        for uid, pair in taken:
            try:
                written += self.events_write([pair])
            except Exception:
                log.debug("controller: Event %s not archived", uid, exc_info=True)
                dropped.append(uid)
        if dropped:
            self.events_dropped += len(dropped)
            log.warning("controller: %d Events not archived after %d attempts, dropped (first: %s)", len(dropped),
                        ARCHIVE_MAX_ATTEMPTS, dropped[0])
        return written

    def _sweep_mirror(self) -> bool:
        """Record as deleted the live mirror rows of each kind just (re-)listed that its informer's cache (the
        cluster, as of now) does not have. A sweep that fails is tried again after SWEEP_RETRY_SECONDS."""
        if self.clock() < self._sweep_retry_at:
            return False
        sweeps = self.handoff.take_sweeps()
        if not sweeps:
            return False
        _close_old_db_connections()
        for i, sweep in enumerate(sweeps):
            informer = self.informers.get(sweep.kind)
            if informer is None:
                continue
            try:
                if self.object_cache:  # entries of objects deleted while no controller watched
                    kind = informer.kind
                    self.cache_prune(f"{kind.group}/{kind.version}/{kind.plural}/", informer.keys())
                gone = self.mirror_sweep(self.reconciler_of[sweep.kind], informer.uids(), informer.namespace,
                                         sweep.listed_at) if self.mirror and sweep.kind in self.primary else []
            except Exception:
                log.warning("controller: mirror sweep of %s failed; retrying in %.0fs", informer,
                            SWEEP_RETRY_SECONDS, exc_info=True)
                self.handoff.put_sweeps_back(sweeps[i:])
                self._sweep_retry_at = self.clock() + SWEEP_RETRY_SECONDS
                return True
            self.swept += len(gone)
            if gone:
                log.info("controller: %d %s gone from the cluster while unwatched, recorded deleted", len(gone),
                         informer.kind.plural)
        return True

    def resync(self) -> bool:
        """Enqueue every cached key of the reconciled kinds (the periodic resync); True when any."""
        self._next_resync = self.clock() + self.resync_seconds
        self._resync_now = False
        keys = self.cached_keys()
        for key in keys:
            self.handoff.put_key(key)
        self.resyncs += 1
        log.info("controller: resync of %d keys", len(keys))
        return self._enqueue_handed_off() or bool(keys)

    def _sleep_budget(self) -> float:
        now = self.clock()
        deadlines = [max(self._next_pump, self._queue_retry_at) if self.running else now + 0.5]
        if self.running and not self.background and self.handoff.events_pending():  # the archive is ours
            deadlines.append(self._archive_retry_at)
        if self.running and self._mirror_refresh_at > now and self.handoff.pending()[1]:  # refreshes linger
            deadlines.append(self._mirror_refresh_at)
        if self.running and self.resync_seconds > 0:
            deadlines.append(self._next_resync)
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
        if self.running:
            self._stop_informers()
        if self.elector is not None:
            self.elector.release()
