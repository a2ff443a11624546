"""A controller shard put together (`runcontroller --shard ID`): the composition of the shard's Lease, the
membership of the others, the ownership of keys, the filtering handoff and the controller, plus the controller's
own Lease for the cluster-wide work.

- The `Controller` runs its informers while this replica holds `opsconsole-shard-<id>` (its elector is the
  shard's), and hands off only the keys `ShardOwnership` gives it (shards/handoff.py).
- A `ShardStepper` thread lists the shard Leases every retry period, re-assigns the keys when the view or the key
  set changed, and enqueues the keys handed over to this shard (with each one's object for the object cache, and a
  `{"type": "resync", "reason": "shard handover"}` trigger) once their previous owner has stopped; on the replica
  that runs the cluster-wide work it asks for a mirror sweep whenever the view changes (deletions a dying shard
  never recorded).
- With `informers="labels"` (the default; `runcontroller --shard-informers all` turns it off) the shard's
  informers of the reconciled kinds list and watch only the objects labelled with its id, and ownership is that
  label (labels.py); the replica that runs the cluster-wide work also runs the `Sharder` (sharder.py), which keeps
  the labels, and whose unfiltered view the mirror's sweep and the object cache's prune of the reconciled kinds
  read. The children stay unfiltered. With "all" every shard lists and watches every object.
- The controller's Lease (`opsconsole-controller`, controller/leader.py) is campaigned for on its own thread (by
  the ring shards; a canary never campaigns): the replica that holds it also runs the cluster-wide work (the
  Events archive, healing, audit checkpoints, the mirror's ghost sweep); CRDs are installed at start-up by whoever
  is started with `--install-crds`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import supervise
from reconcilers.engine.controller import adapters
from reconcilers.engine.controller.handoff import MirrorSweep
from reconcilers.engine.controller.kindmap import KindMap, kind_id
from reconcilers.engine.controller.leader import LeaderElector
from reconcilers.engine.controller.loop import Controller
from reconcilers.engine.controller.wiring import build_controller, leader_elector
from reconcilers.engine.shards.handoff import ShardHandoff
from reconcilers.engine.shards.labels import INFORMER_MODES, LabelOwnership, shard_selector
from reconcilers.engine.shards.membership import ShardMembers, shard_elector
from reconcilers.engine.shards.ownership import SELECTOR, ShardOwnership
from reconcilers.engine.shards.sharder import Sharder
from reconcilers.engine.triggers import resync_trigger

log = logging.getLogger(__name__)


def handover_trigger() -> dict[str, Any]:
    """The trigger of a key enqueued because it was handed over to this shard."""
    return {**resync_trigger(), "reason": "shard handover"}


@dataclass
class Shard:
    """The running pieces of one controller shard (see the module)."""

    controller: Controller
    ownership: ShardOwnership
    members: ShardMembers
    elector: LeaderElector
    cluster: LeaderElector
    stepper: ShardStepper
    sharder: Sharder | None = None  # with informers="labels"

    def start(self) -> None:
        """The cluster Lease's campaign (not for a canary: the cluster-wide work stays with the stable version),
        the membership step and the sharder, on threads of their own."""
        if self.ownership.selector is None:
            self.cluster.start()
            if self.sharder is not None:
                self.sharder.start()
        self.stepper.start()

    def stop(self) -> None:
        """Stop the threads (the cluster Lease is released; the controller releases the shard's)."""
        self.stepper.stop()
        if self.sharder is not None:
            self.sharder.stop()
        self.cluster.stop()


class ShardStepper:
    """Every `period` seconds: the live shards, the ownership's step, the handed-over keys into the handoff."""

    def __init__(self, members: ShardMembers, ownership: ShardOwnership, handoff: ShardHandoff,
                 controller: Controller, elector: LeaderElector, period: float,
                 cluster_leading: Callable[[], bool] = lambda: False) -> None:
        self.members, self.ownership, self.handoff, self.controller = members, ownership, handoff, controller
        self.elector, self.cluster_leading = elector, cluster_leading
        self.period = period
        self._swept_for: tuple[str, bool] = ("", False)  # the view and leadership the last sweep was asked for
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: supervise.Supervised | None = None

    def step(self) -> list[str]:
        """One round; the keys handed over to this shard in it."""
        try:
            live = self.members.step()
        except Exception as exc:  # the API away: the view stays as it was (its Leases expire on their own)
            log.warning("shard %s: could not list the shard Leases: %s", self.ownership.shard, exc)
            live = self.members.live
        if self.ownership.leading() and not self.controller.synced():
            return []  # the first assignment waits for the informers' first lists: it hands over every key at once
        written = self.elector.annotations
        keys = self.ownership.step(live)
        if self.elector.annotations != written and self.elector.is_leader and not self._stop.is_set():
            self.elector.step()  # the new view into our Lease now: a shard gaining our keys waits for it
        if keys:
            for key in keys:  # the cache entry dropped first: the informer's copy is slim (no managedFields, which
                if _cached(self.controller, key) is not None:  # provenance reads), so the run GETs it whole, and
                    self.handoff.put_object(key, None)  # an entry the old owner left behind is not trusted either
            trigger = handover_trigger()
            self.handoff.put_keys(keys, {key: ([trigger], 0) for key in keys})
            log.info("shard %s: %d keys handed over", self.ownership.shard, len(keys))
        self._sweep_if_due()
        return keys

    def _sweep_if_due(self) -> None:
        """On the replica that runs the cluster-wide work, whenever the view changes or it takes that work over: a
        mirror sweep of every reconciled kind against its informer's store. A key whose object went away without
        a finalizer while its shard was dying had nobody to record its deletion; the sweep does."""
        token, leading = self.ownership.view_token, bool(self.cluster_leading())
        due = leading and bool(token) and (token, leading) != self._swept_for
        self._swept_for = (token, leading)
        if not due:
            return
        for kid, informer in self.controller.informers.items():
            if kid in self.controller.kinds.primary and informer.listed_at is not None:
                self.handoff.put_sweep(MirrorSweep(kid, informer.listed_at))

    def wake(self) -> None:
        """A step now (a drained key to release, labels.py)."""
        self._wake.set()

    def run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.step()
            self._wake.wait(max(0.0, self.period - (time.monotonic() - started)))
            self._wake.clear()

    def start(self) -> None:
        self._stop.clear()
        self._thread = supervise.start(f"shard-{self.ownership.shard}", self.run)

    def request_stop(self) -> None:
        """Stop writing the shard's Lease from now on (safe from a signal handler: the controller releases it)."""
        self._stop.set()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.signal_stop()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.stop(5.0)


def _cached(controller: Controller, key: str) -> dict[str, Any] | None:
    for kid in controller.kinds.primary:
        informer = controller.informers.get(kid)
        obj = informer.get(key) if informer is not None else None
        if obj is not None:
            return obj
    return None


def _holds(controller: Controller, key: str) -> bool:
    """Whether the controller's informers of the reconciled kinds hold the object of `key`."""
    return any(key in informer for kid, informer in controller.informers.items() if kid in controller.kinds.primary)


def _count(controller: Controller) -> int:
    """How many objects the controller's informers of the reconciled kinds hold."""
    return sum(len(informer) for kid, informer in controller.informers.items()
               if kid in controller.kinds.primary)


def _objects(controller: Controller, labels: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """The reconciled kinds' cached objects: whole with `labels`, else only their uids (no unpacking)."""
    for kid in controller.kinds.primary:
        informer = controller.informers.get(kid)
        if informer is None:
            continue
        if labels:
            for key in informer.keys():
                obj = informer.get(key)
                if obj is not None:
                    yield key, obj
        else:
            for uid in informer.uids():
                key = informer.key_for_uid(uid)
                if key is not None:
                    yield key, {"metadata": {"uid": uid}}


def build_shard(api: Any, reconcilers: Sequence[Reconciler], shard: str, *, namespace: str,
                by: str = "uid", selector: str | None = None, identity: str | None = None,
                lease_duration: float | None = None, renew_deadline: float | None = None,
                retry_period: float | None = None, informers: str = "labels", **controller_options: Any) -> Shard:
    """Shard `shard` of the controller of `reconcilers` (see the module); `controller_options` go to
    `build_controller`. `informers`: "labels" (a shard lists and watches only its own objects, the sharder
    labelling them) or "all" (every object, no label written). ValueError names a bad shard id, shard-by, selector
    or informers mode."""
    if informers not in INFORMER_MODES:
        raise ValueError(f"shard informers {informers!r}: one of {', '.join(INFORMER_MODES)}")
    cluster = leader_elector(api, identity, lease_duration=lease_duration, renew_deadline=renew_deadline,
                             retry_period=retry_period)
    elector = shard_elector(api, shard, namespace=namespace, identity=cluster.identity,
                            lease_duration=cluster.lease_duration, renew_deadline=cluster.renew_deadline,
                            retry_period=cluster.retry_period)
    members = ShardMembers(api, namespace)
    holder: dict[str, Controller] = {}

    def annotate(annotations: dict[str, str]) -> None:
        elector.annotations = annotations

    ownership: ShardOwnership
    if informers == "labels":
        ownership = LabelOwnership(
            shard, members, api=api, by=by, selector=selector, leading=lambda: elector.is_leader, annotate=annotate,
            cached=lambda key: _holds(holder["controller"], key), count=lambda: _count(holder["controller"]))
    else:
        ownership = ShardOwnership(
            shard, members, by=by, selector=selector, leading=lambda: elector.is_leader, annotate=annotate,
            objects=lambda labels: _objects(holder["controller"], labels))
    if selector is not None:
        elector.annotations = {SELECTOR: ownership.selector.text}  # type: ignore[union-attr]
    watched = controller_options.get("cluster", DEFAULT_CLUSTER)  # the cluster's name prefixes its keys
    prefixes = {key_join(watched, f"{r.resource.group}/{r.resource.version}/{r.resource.plural}/"):
                kind_id(r.resource) for r in reconcilers}
    handoff = ShardHandoff(ownership, prefixes, cluster=watched)
    sharder = None
    if isinstance(ownership, LabelOwnership):
        sharder = Sharder(api, KindMap.of(reconcilers), ownership, members, period=cluster.retry_period,
                          leading=lambda: cluster.is_leader and ownership.selector is None,
                          sweep=lambda kid, at: handoff.put_sweep(MirrorSweep(kid, at)),
                          informer_options={**(controller_options.get("informer_options") or {}), "cluster": watched})
        base_sweep = controller_options.pop("mirror_sweep", None) or functools.partial(adapters.mirror_sweep,
                                                                                      cluster=watched)
        controller_options["mirror_sweep"] = sharder.mirror_sweep(base_sweep)
        controller_options["cache_prune"] = sharder.cache_prune(
            controller_options.pop("cache_prune", None) or adapters.cache_prune, prefixes)
        controller_options["primary_selector"] = shard_selector(shard)
    controller = build_controller(api, reconcilers, elector=elector, handoff=handoff, observe=ownership.observe,
                                  cluster_leader=lambda: cluster.is_leader, heal_enqueue=handoff.put_keys_as_leader,
                                  **controller_options)
    holder["controller"] = controller
    stepper = ShardStepper(members, ownership, handoff, controller, elector, cluster.retry_period,
                           cluster_leading=lambda: cluster.is_leader)
    if isinstance(ownership, LabelOwnership):
        ownership.wake = stepper.wake
    return Shard(controller, ownership, members, elector, cluster, stepper, sharder)
