"""The sharder of `runcontroller --shard-informers labels`: it keeps `shard.opsconsole.io/owner=<shard>` on every
reconciled object, so that each shard's informers list and watch only their own objects (labels.py).

It runs on the replica that holds the controller's Lease (the one that does the cluster-wide work; a canary never
does), with informers of its own over every reconciled object, unfiltered, that keep only a stub of each (name,
namespace, uid, resourceVersion, labels): the whole key set is what the bounded-load ring places, and what the
mirror's sweep compares with (`present`: the shards' own informers see only their objects, so on this mode the
sweep and the object cache's prune of the reconciled kinds read the sharder's view, and only where it runs).

Each pass (on an event, when the live shards change, and every RESCAN_SECONDS, at most every ten times the last
placement's duration while a burst goes on) places every object with the ownership's code (a live canary's
selection first, then the ring over the live ring shards) and patches what differs (`decide`):
- an object without an owner (new, or let go by its old owner) is labelled with its shard ("label");
- an object whose owner is not live (its Lease expired or was released; or a forged owner no shard is) is labelled
  with its shard at once, any drain label removed ("relabel");
- an object whose owner is live but is not its shard any more gets `shard.opsconsole.io/drain=true` ("drain"): the
  owner stops acting on it and removes both labels, and the next pass labels the new owner. A forged label is
  corrected the same way: at worst, a shard acts on (or ignores) a key until the next pass.
Every patch is a JSON merge patch of metadata.labels, conditional on the resourceVersion the sharder saw (a stale
view is refused, 409, and looked at again when its event comes), with the field manager `opsconsole-sharder`; at
most `max_patches` per pass; counted in `opsconsole_shard_label_patches_total{shard,action}`.

An object deleted with no live owner watching it (unlabelled, or its owner dead) asks for a mirror sweep of its
kind, as does every (re-)list of the sharder's informers: nobody else would record that deletion.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import kube, metrics, supervise
from reconcilers.engine.controller.events import DELETED, InformerEvent
from reconcilers.engine.controller.informer import Informer
from reconcilers.engine.controller.kindmap import KindId, KindMap, kind_id
from reconcilers.engine.shards.labels import DRAIN, OWNER, LabelOwnership
from reconcilers.engine.shards.membership import ShardMembers
from reconcilers.engine.shards.ownership import View
from reconcilers.engine.shards.selector import labels_of

log = logging.getLogger(__name__)

SHARDER_FIELD_MANAGER = "opsconsole-sharder"
#: a pass with nothing new every so often (a patch refused, or lost, is retried)
RESCAN_SECONDS = 30.0
#: at most this many patches per pass (the next pass follows at once)
MAX_PATCHES = 500
_STUB_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels")

Labels = dict[str, str | None]
Sweep = Callable[[KindId, datetime], None]


def label_stub(obj: dict[str, Any]) -> dict[str, Any]:
    """What the sharder's informers keep of an object: its name, namespace, uid, resourceVersion and labels."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in _STUB_METADATA if k in meta}}


def decide(owner: str, draining: bool, want: str | None, live: set[str]) -> tuple[str, Labels] | None:
    """The patch of an object's shard labels (action, labels; None: leave it) given its `owner` label ('' none),
    whether it carries the drain label, the shard the placement gives it (`want`; None: no live shard) and the live
    shards (see the module)."""
    if not want or (owner == want and not draining):
        return None
    if owner and owner in live:  # a live owner lets go first (it removes both labels); then the new one is labelled
        return ("drain", {DRAIN: "true"}) if owner != want and not draining else None
    patch: Labels = {OWNER: want} if owner != want else {}
    if draining:
        patch[DRAIN] = None
    return ("relabel" if owner else "label"), patch


class Sharder:
    """Keeps the shard labels of `kinds`' reconciled objects while `leading()` (see the module). `ownership`: the
    placement and the view of `members`' live shards; `sweep(kind, listed_at)`: asks the controller for a mirror
    sweep of a kind."""

    def __init__(self, api: Any, kinds: KindMap, ownership: LabelOwnership, members: ShardMembers, *,
                 leading: Callable[[], bool], sweep: Sweep, period: float = 1.0,
                 informer_options: dict[str, Any] | None = None, max_patches: int = MAX_PATCHES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.kinds, self.ownership, self.members = api, kinds, ownership, members
        self.leading, self.sweep, self.period, self.clock = leading, sweep, period, clock
        self.informer_options, self.max_patches = dict(informer_options or {}), max_patches
        self.informers: dict[KindId, Informer] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: supervise.Supervised | None = None
        self._dirty = True
        self._view: View | None = None
        self._live: set[str] = set()
        self._sent: dict[str, str] = {}  # key → the resourceVersion a patch was sent on (not sent twice)
        self._next_rescan = self._not_before = -float("inf")
        self.patches = 0

    # -- its informers -------------------------------------------------------------------------------------

    def _handle(self, event: InformerEvent) -> None:
        if event.type == DELETED and not event.relisted:
            owner = labels_of(event.obj).get(OWNER) or ""
            with self._lock:
                unwatched = not owner or owner not in self._live
            informer = self.informers.get(kind_id(event.kind))
            if unwatched and informer is not None and informer.listed_at is not None:  # no live shard saw it go
                self.sweep(kind_id(event.kind), informer.listed_at)  # the sweep records it
        with self._lock:
            self._dirty = True
        self._wake.set()

    def _listed(self, informer: Informer) -> None:
        if informer.listed_at is not None:
            self.sweep(kind_id(informer.kind), informer.listed_at)
        self._wake.set()

    def _start_informers(self) -> None:
        self.informers = {kid: Informer(self.api, kind, self._handle, on_listed=self._listed, keep=label_stub,
                                        **self.informer_options).start()
                          for kid, kind in self.kinds.primary.items()}
        log.info("sharder: informers started for %s", ", ".join(k.plural for k in self.kinds.primary.values()))

    def _stop_informers(self) -> None:
        informers, self.informers = list(self.informers.values()), {}
        for informer in informers:
            informer.signal_stop()
        for informer in informers:
            informer.stop()
        if informers:
            log.info("sharder: stopped (not running the cluster-wide work)")
        with self._lock:
            self._sent, self._view, self._dirty = {}, None, True

    def synced(self) -> bool:
        """Whether the sharder runs and each of its informers has listed."""
        informers = self.informers
        return bool(informers) and all(i.synced.is_set() for i in informers.values())

    def present(self, kid: KindId) -> tuple[set[str], list[str], datetime | None] | None:
        """The uids and keys of every object of a reconciled kind, and when its last list began (None: the sharder
        does not run here, or has not listed yet)."""
        informer = self.informers.get(kid)
        if informer is None or not informer.synced.is_set() or not self.leading():
            return None
        return informer.uids(), informer.keys(), informer.listed_at

    def mirror_sweep(self, base: Callable[..., list[str]]) -> Callable[..., list[str]]:
        """`base` (the mirror's sweep) over the sharder's view of the kind: nothing where it does not run."""
        def sweep(reconciler: Reconciler, present: set[str], namespace: str | None, listed_at: Any) -> list[str]:
            seen = self.present(kind_id(reconciler.resource))
            return base(reconciler, seen[0], namespace, seen[2]) if seen is not None else []

        return sweep

    def cache_prune(self, base: Callable[[str, list[str]], Any], prefixes: dict[str, KindId]
                    ) -> Callable[[str, list[str]], Any]:
        """`base` (the object cache's prune) over the sharder's keys for the reconciled kinds' `prefixes` (nothing
        where it does not run), as given for the others (the children, watched unfiltered)."""
        def prune(prefix: str, present: list[str]) -> Any:
            kid = prefixes.get(prefix)
            if kid is None:
                return base(prefix, present)
            seen = self.present(kid)
            return base(prefix, seen[1]) if seen is not None else None

        return prune

    # -- one pass ------------------------------------------------------------------------------------------

    def step(self) -> int:
        """Start or stop the informers with the cluster-wide work, and once they have listed, one pass when due;
        how many patches it sent."""
        if not self.leading():
            if self.informers:
                self._stop_informers()
            return 0
        if not self.informers:
            self._start_informers()
            return 0
        if not self.synced():
            return 0
        now = self.clock()
        view = self.ownership.view_of(self.members.live)
        with self._lock:
            due = self._dirty or view != self._view or now >= self._next_rescan
            if not due or now < self._not_before:
                return 0
            self._dirty, self._view = False, view
            self._live = set(view.ring) | {s for s, _ in view.canaries}
            live = set(self._live)
        objects = [(key, obj, kind) for kid, informer in self.informers.items()
                   for key, obj, kind in ((k, informer.get(k), self.kinds.primary[kid]) for k in informer.keys())
                   if obj is not None]
        assigned = self.ownership.placement(view, [(key, obj) for key, obj, _ in objects])
        placed = self.clock()
        sent = self._patch(objects, assigned, live)
        with self._lock:
            self._next_rescan = now + RESCAN_SECONDS
            # a placement costs O(objects): while a burst goes on, at most a tenth of the time goes to it
            self._not_before = now + 10 * (placed - now)
        return sent

    def _patch(self, objects: list[tuple[str, dict[str, Any], Any]], assigned: dict[str, str], live: set[str]) -> int:
        sent, present = 0, set()
        for key, obj, kind in objects:
            present.add(key)
            labels = labels_of(obj)
            change = decide(labels.get(OWNER) or "", DRAIN in labels, assigned.get(key), live)
            meta = obj["metadata"]
            rv = str(meta.get("resourceVersion") or "")
            if change is None or self._sent.get(key) == rv:
                continue
            if sent >= self.max_patches:
                with self._lock:
                    self._dirty = True  # the rest at the next pass
                break
            action, patch = change
            try:
                kube.patch_object(self.api, kind, meta.get("namespace") or None, meta["name"],
                                  {"metadata": {"resourceVersion": rv, "labels": patch}},
                                  field_manager=SHARDER_FIELD_MANAGER)
            except Exception as exc:  # noqa: BLE001 - the API away: the next pass
                if isinstance(exc, kube.ApiException) and exc.status in (404, 409):  # gone, or changed since: its
                    log.debug("sharder: %s of %s refused (%s)", action, key, exc.status)  # event brings it back
                    continue
                log.warning("sharder: could not label %s: %s; retrying at the next pass", key, exc)
                with self._lock:
                    self._dirty = True
                break
            log.debug("sharder: %s %s %s", action, key, patch)
            self._sent[key] = rv
            sent += 1
            metrics.SHARD_LABEL_PATCHES.labels(self.ownership.shard, action).inc()
        self._sent = {k: v for k, v in self._sent.items() if k in present}
        self.patches += sent
        if sent:
            log.info("sharder: %d label patches", sent)
        return sent

    # -- the thread ----------------------------------------------------------------------------------------

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:
                log.exception("sharder: a pass failed")
            with self._lock:  # a pass due: as soon as the last one allows; else an event, or the period
                due = self._dirty and self.synced()
                wait = max(0.01, self._not_before - self.clock()) if due else self.period
            self._wake.wait(min(self.period, wait))
            self._wake.clear()
        self._stop_informers()

    def start(self) -> None:
        self._stop.clear()
        self._thread = supervise.start(f"sharder-{self.ownership.shard}", self.run)

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.signal_stop()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.stop(10.0)
        self._stop_informers()
