"""Which keys this controller shard acts on, and the handover when they move.

A replica started as shard `<id>` acts (enqueues, writes the object cache and the mirror) only on the keys the
ring (`ring.Ring.assign`: consistent hashing with bounded loads) gives it among the live ring shards, over the
objects' uids (or their namespaces, `by="namespace"`), as listed by the controller's own informers. A *canary*
shard has a label selector instead: it acts on exactly the objects its selector matches, is not on the ring, and
every other shard leaves those objects to it while its Lease is live (the selector travels in its Lease's
`opsconsole.io/shard-selector` annotation).

The view a shard acts on (the live ring shards and the live canaries with their selectors) is named by a token
that the shard writes into its own Lease (`opsconsole.io/shard-view`) at its next renewal. When the view
changes, a shard stops acting on the keys it loses at once, and a key it gains is acted on only once the key's
previous owner shows the same token in its Lease (it has seen the new view, so it has stopped) or is no longer
live (its Lease expired or was released): the old owner stops before the new one starts. The gained keys are
then enqueued once (the level-triggered catch-up of whatever happened to them meanwhile). Keys that move because
the key set changed (bounded loads cap a shard at 1.25 × the mean) move at once: every shard computes the same
assignment from the same view, and the workqueue's lease keeps one run per key at a time while two shards'
informers disagree for a moment.

A key this shard has not placed yet (an object created since the last assignment) is judged alone by plain
consistent hashing, the same answer on every shard; the next assignment (within `reassign_interval` of a change
of the key set, or ten times the last assignment's duration where that is longer: 0.66 s for 50,000 keys, so at
most every 6.6 s while a burst goes on) places it with the rest. A view change is assigned at once. Thread-safe:
informer threads ask `owns`, one thread calls `step`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reconcilers.core.clusters import key_split
from reconcilers.engine import metrics
from reconcilers.engine.controller.events import DELETED, MODIFIED, InformerEvent
from reconcilers.engine.shards.membership import ShardMembers
from reconcilers.engine.shards.ring import Ring
from reconcilers.engine.shards.selector import Selector, labels_of, parse

log = logging.getLogger(__name__)

VIEW = "opsconsole.io/shard-view"
SELECTOR = "opsconsole.io/shard-selector"
KEYS = "opsconsole.io/shard-keys"
PENDING = "opsconsole.io/shard-pending"
SHARD_BY = ("uid", "namespace")


@dataclass(frozen=True)
class View:
    """The membership a shard acts on: the live ring shards and the live canaries (shard, selector)."""

    ring: tuple[str, ...]
    canaries: tuple[tuple[str, str], ...]

    @property
    def token(self) -> str:
        """A short stable name of the view (what a shard writes into its Lease)."""
        return hashlib.blake2b(repr((self.ring, self.canaries)).encode(), digest_size=6).hexdigest()


class ShardOwnership:
    """Shard `shard`'s keys (see the module). `objects(labels)`: the reconciled kinds' cached objects by key (the
    informers' stores; their uids alone will do unless `labels`); `leading()`: whether this replica holds the
    shard's Lease; `annotate(dict)`: what its Lease carries from its next renewal."""

    def __init__(self, shard: str, members: ShardMembers, *, objects: Callable[[bool], Iterable[tuple[str, Any]]],
                 leading: Callable[[], bool], annotate: Callable[[dict[str, str]], None], by: str = "uid",
                 selector: str | None = None, reassign_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if by not in SHARD_BY:
            raise ValueError(f"shard-by {by!r}: one of {', '.join(SHARD_BY)}")
        self.shard, self.members, self.by = shard, members, by
        self.objects, self.leading, self.annotate = objects, leading, annotate
        self.selector: Selector | None = parse(selector) if selector is not None else None
        self.reassign_interval, self.clock = reassign_interval, clock
        self._lock = threading.Lock()
        self._view: View | None = None
        self._ring: Ring | None = None
        self._canaries: tuple[tuple[str, Selector], ...] = ()
        self._assigned: dict[str, str] = {}  # key → shard, as of the last assignment
        self._owned: set[str] = set()  # the keys this shard acts on
        self._pending: dict[str, str] = {}  # gained keys → the previous owner that must stop first
        self._recent: dict[str, tuple[str, dict[str, str]]] = {}  # keys seen since: (ring input, labels)
        self._recent_before: dict[str, tuple[str, dict[str, str]]] = {}  # those the last assignment placed
        self._dirty = True
        self._next_reassign = -float("inf")
        self.moves = 0  # keys gained over this shard's life (handed over to it)
        self.lost = 0  # keys lost
        self.handover_waits = 0  # gained keys that waited for their previous owner

    # -- what the informer threads ask ---------------------------------------------------------------------

    def observe(self, event: InformerEvent) -> None:
        """A reconciled object's event (before its keys are handed off): remember what places it, and assign again
        soon when the key set or its labels changed."""
        if not event.key:
            return
        meta = (event.obj or {}).get("metadata") or {}
        labels = labels_of(event.obj)
        with self._lock:
            self._recent[event.key] = (self._ring_input(event.key, str(meta.get("uid") or "")), labels)
            if event.type != MODIFIED or labels != labels_of(event.old) or event.type == DELETED:
                self._dirty = True

    def owns(self, key: str) -> bool:
        """Whether this shard acts on `key` now."""
        if not self.leading():
            return False
        with self._lock:
            if self._view is None:
                return False
            if key in self._owned:
                return True
            if key in self._pending or key in self._assigned:
                return False
            recent = self._recent.get(key)
        return self._owner_alone(key, recent) == self.shard

    @property
    def view_token(self) -> str:
        """The token of the view this shard acts on ('' : none)."""
        with self._lock:
            return self._view.token if self._view is not None else ""

    @property
    def owned(self) -> int:
        """How many keys this shard acts on."""
        with self._lock:
            return len(self._owned)

    # -- one step ------------------------------------------------------------------------------------------

    def step(self, live: tuple[str, ...]) -> list[str]:
        """Take the live shards (`members.step()`), assign again when the view or the key set changed, and answer
        the gained keys whose previous owner has stopped (to enqueue once, now that this shard acts on them)."""
        if not self.leading():
            with self._lock:
                if self._view is not None:
                    log.info("shard %s: not holding its Lease, acting on no key", self.shard)
                self._view, self._owned, self._pending, self._assigned = None, set(), {}, {}
            self._gauge()
            return []
        view = self._view_of(live)
        now = self.clock()
        with self._lock:
            changed = view != self._view
            due = changed or (self._dirty and now >= self._next_reassign)
        if due:
            self._assign(view, now)
        return self._ready(live)

    def _view_of(self, live: tuple[str, ...]) -> View:
        canaries, ring = [], []
        for shard in live:
            selector = self.members.annotations(shard).get(SELECTOR) if shard != self.shard else (
                self.selector.text if self.selector is not None else None)
            if selector:
                canaries.append((shard, selector))
            else:
                ring.append(shard)
        if self.selector is None and self.shard not in ring:
            ring.append(self.shard)  # ourselves, before our own Lease is listed
        elif self.selector is not None and all(s != self.shard for s, _ in canaries):
            canaries.append((self.shard, self.selector.text))
        return View(tuple(sorted(ring)), tuple(sorted(canaries)))

    def _assign(self, view: View, now: float) -> None:
        with self._lock:
            self._dirty = False
            self._recent_before, self._recent = self._recent, {}
        objects = list(self.objects(bool(view.canaries)))
        assigned, ring, canaries = self._placement(view, objects)
        owned = {key for key, shard in assigned.items() if shard == self.shard}
        with self._lock:
            before_view = self._view
        if before_view is None:  # this shard (re)joins: who acted on each key without it
            others = View(tuple(s for s in view.ring if s != self.shard),
                          tuple(c for c in view.canaries if c[0] != self.shard))
            before_assigned = self._placement(others, objects)[0]
        with self._lock:
            if before_view is not None:
                before_assigned = self._assigned
            lost = self._owned - owned
            gained = owned - self._owned - set(self._pending)
            self._pending = {k: prev for k, prev in self._pending.items() if k in owned}
            for key in gained:
                prev = before_assigned.get(key) or (self._owner_alone(key, self._recent_before.get(key))
                                                     if before_view is not None else "")
                if prev == self.shard:  # judged ours alone since the last assignment: acted on already
                    self._owned.add(key)
                else:
                    self._pending[key] = prev
            self._owned -= lost
            self._view, self._ring, self._canaries, self._assigned = view, ring, canaries, assigned
            # an assignment costs O(keys): while the key set keeps changing, at most a tenth of the time goes to it
            self._next_reassign = now + max(self.reassign_interval, 10 * (self.clock() - now))
            self.lost += len(lost)
            owned_count = len(self._owned) + len(self._pending)
        self.annotate(self._annotations())
        self._gauge()
        if before_view != view or lost or gained:
            log.info("shard %s: view %s (ring %s, canaries %s): %d keys, %d lost, %d gained", self.shard,
                     view.token, ",".join(view.ring), ",".join(s for s, _ in view.canaries), owned_count,
                     len(lost), len(gained))

    def _placement(self, view: View, objects: list[tuple[str, Any]]
                   ) -> tuple[dict[str, str], Ring | None, tuple[tuple[str, Selector], ...]]:
        """Every key's shard under `view` (a canary's selection first, then the ring), the ring, the canaries."""
        canaries = []
        for shard, text in view.canaries:
            try:
                canaries.append((shard, parse(text)))
            except ValueError as exc:  # another shard's bad annotation: that canary selects nothing here
                log.warning("shard %s: ignoring canary %s: %s", self.shard, shard, exc)
        ring = Ring(view.ring) if view.ring else None
        selected: dict[str, str] = {}
        inputs: dict[str, str] = {}
        for key, obj in objects:
            canary = next((shard for shard, sel in canaries if sel.matches(labels_of(obj))), None)
            if canary is not None:
                selected[key] = canary
            else:
                inputs[key] = self._ring_input(key, str(((obj or {}).get("metadata") or {}).get("uid") or ""))
        placed = ring.assign(set(inputs.values())) if ring is not None else {}
        assigned = {key: placed[ident] for key, ident in inputs.items() if ident in placed}
        return {**assigned, **selected}, ring, tuple(canaries)

    def _gauge(self) -> None:
        with self._lock:
            owned, pending = len(self._owned), len(self._pending)
        metrics.SHARD_KEYS.labels(self.shard, "owned").set(owned)
        metrics.SHARD_KEYS.labels(self.shard, "pending").set(pending)

    def _annotations(self) -> dict[str, str]:
        """What this shard's Lease says: the view it acts on, the keys it holds (waiting ones included), the keys
        waiting for their previous owner, and a canary's selector."""
        with self._lock:
            token = self._view.token if self._view is not None else ""
            held, pending = len(self._owned) + len(self._pending), len(self._pending)
        out = {VIEW: token, KEYS: str(held), PENDING: str(pending)}
        if self.selector is not None:
            out[SELECTOR] = self.selector.text
        return out

    def _ready(self, live: tuple[str, ...]) -> list[str]:
        """The pending keys whose previous owner shows our view or is gone; now owned."""
        with self._lock:
            if not self._pending or self._view is None:
                return []
            token = self._view.token
            prevs = set(self._pending.values())
        stopped = {prev for prev in prevs if not prev or prev == self.shard or prev not in live
                   or self.members.annotations(prev).get(VIEW) == token}
        with self._lock:
            ready = [key for key, prev in self._pending.items() if prev in stopped]
            self.handover_waits += sum(1 for key in ready if self._pending[key])
            for key in ready:
                del self._pending[key]
            self._owned.update(ready)
            self.moves += len(ready)
        if ready:
            metrics.SHARD_HANDOVERS.labels(self.shard).inc(len(ready))
            self._gauge()
            self.annotate(self._annotations())
        return ready

    # -- placing one key -----------------------------------------------------------------------------------

    def _ring_input(self, key: str, uid: str) -> str:
        """What the ring hashes for a key: its object's uid, or its namespace (`by`); the key when unknown."""
        if self.by == "namespace":
            try:  # the namespace, whichever cluster's key (reconcilers.core.clusters)
                return key_split(key)[1].split("/")[3]
            except ValueError:
                return key
        return uid or key

    def _owner_alone(self, key: str, recent: tuple[str, dict[str, str]] | None) -> str:
        """The owner of a key not yet assigned: the canary that selects it, else plain consistent hashing."""
        ident, labels = recent if recent is not None else (self._ring_input(key, ""), {})
        for shard, selector in self._canaries:
            if selector.matches(labels):
                return shard
        return self._ring.owner(ident) if self._ring is not None else ""
