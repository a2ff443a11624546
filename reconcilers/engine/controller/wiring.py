"""The controller's composition root: `build_controller` builds every collaborator a `Controller` runs (the kind
map, the handoff, the informers and their event routing, the workqueue feed and gauges, the mirror writer and its
sweeps, the Events archive, the healing evaluator, the audit checkpoint) from settings and the backends
(adapters.py), or from the doubles a test passes, and hands them to `Controller`; `leader_elector` builds the
Lease's elector from settings. `runcontroller` calls both (and starts the /metrics and /healthz endpoints itself).

Settings read: OPSCONSOLE_RESYNC_SECONDS (36000: 10 h; 0: no periodic resync),
OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS (300; 0: none), OPSCONSOLE_EVENT_ARCHIVE (on), OPSCONSOLE_HEALING_INTERVAL
(healing.evaluator.default_interval), OPSCONSOLE_LEADER_NAMESPACE ("default"), OPSCONSOLE_LEADER_LEASE_SECONDS (8),
OPSCONSOLE_LEADER_RENEW_DEADLINE_SECONDS (6), OPSCONSOLE_LEADER_RETRY_SECONDS (1), OPSCONSOLE_STANDBY ("hot"); the
object cache's (objectcache.enabled).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine.controller import adapters
from reconcilers.engine.controller.archive import EventsArchive
from reconcilers.engine.controller.feed import QueueFeed
from reconcilers.engine.controller.gauges import QueueGauges
from reconcilers.engine.controller.handoff import EventPair, Handoff, MirrorUpdate
from reconcilers.engine.controller.informers import InformerSet
from reconcilers.engine.controller.kindmap import KindMap
from reconcilers.engine.controller.leader import LeaderElector
from reconcilers.engine.controller.loop import Controller
from reconcilers.engine.controller.mirror import MirrorWriter
from reconcilers.engine.controller.parts import ControllerParts
from reconcilers.engine.controller.periodic import CheckpointStep, HealingStep
from reconcilers.engine.controller.routing import EventRouter
from reconcilers.engine.controller.standby import STANDBY_MODES, MirrorVersions, StandbyGate
from reconcilers.engine.controller.sweep import MirrorSweepFn, Sweeps
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.engine.healing.evaluator import default_interval as default_heal_interval

Objects = dict[str, dict[str, Any] | None]

#: the Lease's defaults: a standby takes over within LEASE_SECONDS + RETRY_SECONDS of the leader's death (a SIGKILL
#: releases nothing); a leader that cannot renew for RENEW_DEADLINE_SECONDS stops leading (docs/operations.md, "Lease
#: timings", says why these and not controller-runtime's 15 / 10 / 2)
LEASE_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_SECONDS = 8.0, 6.0, 1.0


def default_resync_seconds() -> float:
    """settings.OPSCONSOLE_RESYNC_SECONDS (default 36000 s, 10 h, as controller-runtime's SyncPeriod; 0: no periodic
    resync): how often each key is enqueued again without an event, spread over the period (resync.py); a kind's
    `resync_seconds` overrides it."""
    return float(getattr(settings, "OPSCONSOLE_RESYNC_SECONDS", 36000))


def default_checkpoint_seconds() -> float:
    """settings.OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS (default 300; 0: none)."""
    return float(getattr(settings, "OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS", 300))


def default_archive_events() -> bool:
    """settings.OPSCONSOLE_EVENT_ARCHIVE (default on)."""
    return bool(getattr(settings, "OPSCONSOLE_EVENT_ARCHIVE", True))


def default_standby() -> str:
    """settings.OPSCONSOLE_STANDBY (default "hot"): how a controller that does not lead waits (standby.py)."""
    return str(getattr(settings, "OPSCONSOLE_STANDBY", "hot"))


def leader_elector(api: Any, identity: str | None = None, *, lease_duration: float | None = None,
                   renew_deadline: float | None = None, retry_period: float | None = None) -> LeaderElector:
    """The elector of the controller's Lease; what is not given comes from settings."""
    def seconds(option: float | None, setting: str, default: float) -> float:
        return float(option) if option is not None else float(getattr(settings, setting, default))

    return LeaderElector(
        api, identity=identity, namespace=getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default"),
        lease_duration=seconds(lease_duration, "OPSCONSOLE_LEADER_LEASE_SECONDS", LEASE_SECONDS),
        renew_deadline=seconds(renew_deadline, "OPSCONSOLE_LEADER_RENEW_DEADLINE_SECONDS", RENEW_DEADLINE_SECONDS),
        retry_period=seconds(retry_period, "OPSCONSOLE_LEADER_RETRY_SECONDS", RETRY_SECONDS))


def build_controller(
    api: Any,
    reconcilers: Sequence[Reconciler],
    *,
    elector: LeaderElector | None = None,
    enqueue: Callable[[str], bool] | None = None,
    pump: Callable[[], int] | None = None,
    mirror_write: Callable[[list[MirrorUpdate]], None] | None = None,
    mirror_sweep: MirrorSweepFn | None = None,
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
    cache_write: Callable[[Objects], Any] | None = None,
    cache_prune: Callable[[str, list[str]], Any] | None = None,
    cache_live: Callable[[float | None], Any] | None = None,
    queue_epoch: Callable[[str], str] | None = None,
    note_triggers: Callable[[dict[str, str]], Any] | None = None,
    handoff: Handoff | None = None,
    observe: Callable[[Any], None] | None = None,
    cluster_leader: Callable[[], bool] | None = None,
    heal_enqueue: Callable[..., Any] | None = None,
    standby: str = "cold",
    mirror_versions: MirrorVersions | None = None,
    cluster: str = DEFAULT_CLUSTER,
    primary_selector: str | None = None,
) -> Controller:
    """A `Controller` for `reconcilers` with every collaborator built. A callable passed replaces its default
    backend (tests): `enqueue` (one key → sent?) replaces the batched enqueue, and a test that fakes the enqueue
    without a cache writer gets no object cache; a test that fakes the depths records no depth history. `mirror`:
    the Resource mirror is written (and, unless `archive_events` says otherwise, the Events archive and, unless
    `heal_interval` does, the healing step run: both read it). A controller shard (reconcilers.engine.shards)
    passes its filtering `handoff`, the `observe` hook of its ownership, `cluster_leader` (the cluster-wide work —
    the Events archive, healing, audit checkpoints, the mirror's ghost sweep — runs only while it answers True)
    and `heal_enqueue` (healing's way into the handoff, unfiltered). `standby="hot"`: while not leading, the
    informers list and watch behind a closed gate and the takeover hands off only what may need work (standby.py;
    `mirror_versions` replaces the mirror's resourceVersions read there); "cold": they start on acquiring.
    `cluster`: the cluster `api` reaches; its name prefixes every key (outside the default cluster), files the mirror
    rows it writes, and bounds its sweeps, its takeover's versions and its healing to that cluster's rows.
    `primary_selector`: the reconciled kinds' informers see only the objects this label selector matches (a shard's
    own, shards/labels.py)."""
    if standby not in STANDBY_MODES:
        raise ValueError(f"standby: {standby!r} is not one of {', '.join(STANDBY_MODES)}")
    kinds, handoff = KindMap.of(reconcilers), handoff if handoff is not None else Handoff()
    if cluster != DEFAULT_CLUSTER:  # the backends bound to the cluster (their default is the default cluster)
        mirror_write = mirror_write or functools.partial(adapters.mirror_write, cluster=cluster)
        mirror_sweep = mirror_sweep or functools.partial(adapters.mirror_sweep, cluster=cluster)
        if mirror:
            mirror_versions = mirror_versions or functools.partial(adapters.mirror_versions, cluster=cluster)
        informer_options = {**(informer_options or {}), "cluster": cluster}
    if cluster_leader is not None:
        events_write, heal, checkpoint_write, mirror_sweep = _led(
            cluster_leader, events_write, heal, checkpoint_write, mirror_sweep, api)
    # the object cache the workers read: written before the keys of the same batch are enqueued
    if object_cache is None:
        object_cache = (enqueue is None or cache_write is not None) and adapters.object_cache_enabled()
    feed = QueueFeed(
        handoff, enqueue=enqueue, names=kinds.controller_names, clock=clock, pump=pump or adapters.pump,
        enqueue_many=adapters.enqueue_many if enqueue is None else (lambda keys: [k for k in keys if enqueue(k)]),
        cache_write=cache_write or adapters.cache_write,
        # both defaults: the objects and the keys they make dirty go in one round trip
        cache_and_enqueue=adapters.cache_and_enqueue if enqueue is None and cache_write is None else None,
        cache_prune=cache_prune or adapters.cache_prune, cache_live=cache_live or adapters.cache_live,
        # a Redis that lost the queue without the controller seeing a failed call: only with the real queue
        epoch=queue_epoch if queue_epoch is not None else adapters.queue_epoch if pump is None else None,
        # the keys' triggers (why each run runs): with the real queue, or where a test passes where they go
        note=note_triggers if note_triggers is not None else adapters.note_triggers if enqueue is None else None)
    gauges = QueueGauges(queue_depths or adapters.queue_depths,
                         adapters.depth_record if queue_depths is None else None, kinds.controller_names, clock)
    busy = lambda: gauges.keys_waiting  # noqa: E731 - keys wait for a worker (the last depth sample)
    if archive_events is None:
        archive_events = mirror and default_archive_events()
    archive = (EventsArchive(events_write or adapters.events_writer(api), handoff, batch_size=batch_size, clock=clock,
                             busy=busy) if archive_events else None)
    informers = InformerSet(api, kinds, events=archive_events, options=informer_options,
                            primary_selector=primary_selector)
    if heal_interval is None:  # healing reads the mirror: only a controller that writes it heals by default
        heal_interval = default_heal_interval() if mirror else 0.0
    if heal is None and heal_interval > 0:
        heal = Evaluator(api, kinds.reconcilers, annotations=informers.annotations,
                         enqueue=heal_enqueue or handoff.put_keys, cluster=cluster).step
        if cluster_leader is not None:
            heal = _only_leading(cluster_leader, heal, None)
    router = EventRouter(handoff, kinds, informers, mirror=mirror, object_cache=object_cache, archive=archive,
                         observe=observe)
    gate = StandbyGate(router, handoff, kinds, informers, mirror=mirror, object_cache=object_cache,
                       versions=(mirror_versions or adapters.mirror_versions) if mirror else mirror_versions,
                       clock=clock) if standby == "hot" else None
    parts = ControllerParts(
        kinds=kinds, handoff=handoff, informers=informers, feed=feed, gauges=gauges, archive=archive,
        router=router, standby=gate,
        mirror=MirrorWriter(mirror_write or adapters.mirror_write, handoff, batch_size=batch_size, clock=clock,
                            busy=busy),
        sweeps=Sweeps(handoff, informers, kinds, clock=clock,
                      mirror_sweep=(mirror_sweep or adapters.mirror_sweep) if mirror else None,
                      cache_prune=feed.cache_prune if object_cache else None),
        healing=HealingStep(heal, heal_interval),
        checkpoint=CheckpointStep(checkpoint_write or adapters.checkpoint_write, api,
                                  default_checkpoint_seconds() if checkpoint_seconds is None else checkpoint_seconds),
        object_cache=object_cache)
    return Controller(parts, elector=elector, clock=clock, background=background, batch_size=batch_size,
                      resync_seconds=default_resync_seconds() if resync_seconds is None else resync_seconds,
                      pump_interval=pump_interval, metrics_interval=metrics_interval)


def _only_leading(leading: Callable[[], bool], call: Callable[..., Any], otherwise: Any) -> Callable[..., Any]:
    """`call` while `leading()`, else `otherwise` (called with the arguments when callable)."""
    def gated(*args: Any, **kwargs: Any) -> Any:
        if leading():
            return call(*args, **kwargs)
        return otherwise(*args, **kwargs) if callable(otherwise) else otherwise

    return gated


def _led(leading: Callable[[], bool], events_write: Any, heal: Any, checkpoint_write: Any, mirror_sweep: Any,
         api: Any) -> tuple[Any, Any, Any, Any]:
    """The cluster-wide writers of a controller shard, run only while it is the elected replica: Events offered
    to the archive elsewhere are let go (the elected replica's own informer offers them), a mirror sweep elsewhere
    records nothing deleted."""
    events = _only_leading(leading, events_write or adapters.events_writer(api), lambda batch: len(batch))
    checkpoint = _only_leading(leading, checkpoint_write or adapters.checkpoint_write, None)
    sweep = _only_leading(leading, mirror_sweep or adapters.mirror_sweep, lambda *args, **kwargs: [])
    return events, (_only_leading(leading, heal, None) if heal is not None else None), checkpoint, sweep
