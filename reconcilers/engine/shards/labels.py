"""A controller shard's keys by label (`runcontroller --shard-informers labels`): the shard's informers of the
reconciled kinds list and watch only the objects labelled `shard.opsconsole.io/owner=<its id>`, which the sharder
(sharder.py, on the replica that runs the cluster-wide work) maintains, so a shard holds and watches its own objects
only, not the fleet (issue 40; timebertt's controller sharding).

Ownership here is the label: this shard acts on a key while its informer's cache holds the object (it carries our
label) and the object is not draining. The handover is timebertt's drain: the sharder first adds
`shard.opsconsole.io/drain=true` to an object it moves away from a live shard; this shard, on seeing the drain label,
stops acting on the key at once (`owns` says no from that event on) and then removes both labels (`release`, on the
stepper's thread, a merge patch conditional on the object's resourceVersion); the sharder, seeing the object without
an owner, labels the new one, whose informer then reports it ADDED. So the old owner stops before the new one starts.

What is not a deletion: an object that leaves our selector (its label removed or changed) arrives as a DELETED watch
event whose object no longer carries our label, and a re-list's made-up DELETED (`InformerEvent.relisted`) may be an
object that only left the selector while the watch was down. Neither is handed off as a deletion (no mirror row
recorded deleted, no object cache entry dropped, no key enqueued): `owns` says no, the cache no longer holding it.
A real deletion is a DELETED the watch reports for an object that still carries our label (or a re-listed one that a
GET finds gone, or re-created under another uid): `owns` says yes for that key while that event is routed, on the
informer's thread (a thread-local verdict), so its deletion is recorded by its owner. Anything else deleted is
recorded by the sharder's mirror sweep.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, metrics
from reconcilers.engine.controller.events import DELETED, InformerEvent
from reconcilers.engine.shards.membership import ShardMembers
from reconcilers.engine.shards.ownership import KEYS, PENDING, SELECTOR, VIEW, ShardOwnership, View
from reconcilers.engine.shards.selector import labels_of

log = logging.getLogger(__name__)

#: the label that names an object's shard, and the one that asks that shard to let it go
OWNER = "shard.opsconsole.io/owner"
DRAIN = "shard.opsconsole.io/drain"
#: the Lease annotation with how many objects of the reconciled kinds the shard's informers hold
CACHED = "opsconsole.io/shard-cached"
#: `runcontroller --shard-informers`: every shard lists and watches everything, or only its labelled objects
INFORMER_MODES = ("all", "labels")
#: the field manager of a shard's release (the sharder writes as its own, sharder.py)
RELEASE_FIELD_MANAGER = "opsconsole-shard"

#: (kind, namespace, name, resourceVersion) of a drained object this shard lets go of
Release = tuple[ResourceKind, str, str, str]


def shard_selector(shard: str) -> str:
    """The label selector of shard `shard`'s informers of the reconciled kinds."""
    return f"{OWNER}={shard}"


class LabelOwnership(ShardOwnership):
    """Shard `shard`'s keys by label (see the module). `cached(key)`: whether the shard's informers hold the key's
    object; `count()`: how many objects they hold; `api`: where the release patches go."""

    def __init__(self, shard: str, members: ShardMembers, *, api: Any, cached: Callable[[str], bool],
                 count: Callable[[], int], leading: Callable[[], bool], annotate: Callable[[dict[str, str]], None],
                 by: str = "uid", selector: str | None = None) -> None:
        super().__init__(shard, members, objects=lambda labels: (), leading=leading, annotate=annotate, by=by,
                         selector=selector)
        self.api, self.cached, self.count = api, cached, count
        self._draining: dict[str, Release] = {}  # draining keys: this shard acts on none of them
        self._released: set[str] = set()  # those whose labels are removed already (the watch has not said so yet)
        self._verdict = threading.local()  # the key whose real deletion this thread is routing
        self.wake: Callable[[], None] = lambda: None  # the stepper's: a drained key is released at once
        self.releases = 0

    # -- what the informer threads ask ---------------------------------------------------------------------

    def observe(self, event: InformerEvent) -> None:
        """Before a reconciled object's event is routed: a drain noted (and the stepper woken to release it), and
        for a DELETED whether it is a real deletion (see the module)."""
        key = event.key
        if not key:
            return
        labels = labels_of(event.obj)
        if event.type == DELETED:
            with self._lock:
                self._draining.pop(key, None)
                self._released.discard(key)
            real = labels.get(OWNER) == self.shard and (not event.relisted or self._gone(event))
            self._verdict.key = key if real else None
            return
        self._verdict.key = None
        if DRAIN in labels:
            meta = event.obj.get("metadata") or {}
            with self._lock:
                self._draining[key] = (event.kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                                       str(meta.get("resourceVersion") or ""))
            self.wake()
        else:
            with self._lock:
                self._draining.pop(key, None)
                self._released.discard(key)

    def _gone(self, event: InformerEvent) -> bool:
        """Whether an object a re-list no longer returned is gone (not found, or re-created under another uid)
        rather than out of our selector; when that cannot be told, not gone (the sharder's sweep records it)."""
        meta = event.obj.get("metadata") or {}
        try:
            now = kube.get_object(self.api, event.kind, meta.get("namespace") or None, str(meta.get("name") or ""))
        except Exception as exc:  # noqa: BLE001 - the API away: left to the sweep
            log.info("shard %s: could not tell whether %s is gone (%s): left to the sweep", self.shard, event.key, exc)
            return False
        return now is None or str((now.get("metadata") or {}).get("uid") or "") != str(meta.get("uid") or "")

    def owns(self, key: str) -> bool:
        """Whether this shard acts on `key` now: its object carries our label and is not draining, or its real
        deletion is being routed on this thread."""
        if not self.leading():
            return False
        if getattr(self._verdict, "key", None) == key:
            return True
        with self._lock:
            if key in self._draining:
                return False
        return self.cached(key)

    @property
    def owned(self) -> int:
        with self._lock:
            draining = len(self._draining)
        return max(0, self.count() - draining)

    # -- one step ------------------------------------------------------------------------------------------

    def step(self, live: tuple[str, ...]) -> list[str]:
        """The view written into the Lease with the counts, and the drained keys released; no key is handed over
        here (a key given to this shard arrives as its informer's ADDED)."""
        if not self.leading():
            with self._lock:
                self._view = None
                self._draining, self._released = {}, set()
            self._gauge()
            return []
        view = self._view_of(live)
        with self._lock:
            changed, self._view = view != self._view, view
        if changed:
            log.info("shard %s: view %s (ring %s, canaries %s), by label: %d objects", self.shard, view.token,
                     ",".join(view.ring), ",".join(s for s, _ in view.canaries), self.count())
        self.release()
        self.annotate(self._annotations())
        self._gauge()
        return []

    def release(self) -> int:
        """Remove both labels from every drained object not released yet; how many were."""
        with self._lock:
            todo = {key: rel for key, rel in self._draining.items() if key not in self._released}
        done = 0
        for key, rel in todo.items():
            try:
                if not self._let_go(*rel):
                    continue  # changed under us three times: tried again at the next step
            except Exception as exc:  # noqa: BLE001 - the API away: tried again at the next step
                log.warning("shard %s: could not release %s: %s", self.shard, key, exc)
                break
            with self._lock:
                if key in self._draining:
                    self._released.add(key)
            done += 1
        self.releases += done
        return done

    def _let_go(self, kind: ResourceKind, namespace: str, name: str, rv: str) -> bool:
        """Both labels removed, on the object's resourceVersion we saw draining: when it changed, read again and
        only while it still carries our label and the drain one (otherwise it is not ours to let go any more).
        False: it changed under us each time."""
        for _ in range(3):
            patch = {"metadata": {"resourceVersion": rv, "labels": {OWNER: None, DRAIN: None}}}
            try:
                kube.patch_object(self.api, kind, namespace or None, name, patch,
                                  field_manager=RELEASE_FIELD_MANAGER)
                metrics.SHARD_LABEL_PATCHES.labels(self.shard, "release").inc()
                return True
            except kube.ApiException as exc:
                if exc.status == 404:
                    return True
                if exc.status != 409:
                    raise
            current = kube.get_object(self.api, kind, namespace or None, name)
            labels = labels_of(current)
            if current is None or labels.get(OWNER) != self.shard or DRAIN not in labels:
                return True
            rv = str(current["metadata"].get("resourceVersion") or "")
        return False

    # -- for the sharder -----------------------------------------------------------------------------------

    def view_of(self, live: tuple[str, ...]) -> View:
        """The view of the live shards `live` (the ring shards and the canaries with their selectors)."""
        return self._view_of(live)

    def placement(self, view: View, objects: list[tuple[str, Any]]) -> dict[str, str]:
        """Every key's shard under `view`: a live canary's selection first, then the ring."""
        return self._placement(view, objects)[0]

    def _gauge(self) -> None:
        with self._lock:
            draining = len(self._draining)
        count = self.count() if self.leading() else 0
        metrics.SHARD_KEYS.labels(self.shard, "owned").set(max(0, count - draining))
        metrics.SHARD_KEYS.labels(self.shard, "pending").set(draining)
        metrics.SHARD_CACHED.labels(self.shard).set(count)

    def _annotations(self) -> dict[str, str]:
        """The view, the keys this shard acts on, those draining (`PENDING`), the objects its informers hold."""
        with self._lock:
            token = self._view.token if self._view is not None else ""
            draining = len(self._draining)
        count = self.count()
        out = {VIEW: token, KEYS: str(max(0, count - draining)), PENDING: str(draining), CACHED: str(count)}
        if self.selector is not None:
            out[SELECTOR] = self.selector.text
        return out
