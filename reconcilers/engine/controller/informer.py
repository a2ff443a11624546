"""An informer: list one kind, then watch it from the list's resourceVersion, keeping a cache.

As client-go's reflector: a dropped or timed-out watch resumes from the last resourceVersion it saw (bookmarks
included) at once, without backing off, when it had delivered events or lasted a while (a watch whose
connection breaks mid-stream, as behind a proxy, is such an end, not an error); a 410 Gone (an HTTP 410, or an
ERROR event carrying a Status with code 410) re-lists, and the re-list is diffed against the cache, so objects
added, changed or deleted while the watch was down are reported as ADDED / MODIFIED / DELETED and nothing is
missed. With `label_selector` it lists and watches only the objects the selector matches: an object that stops
matching arrives as a DELETED (the API server's answer to a change out of the selector), and a re-list's made-up
DELETED of an object it no longer returned says so (`InformerEvent.relisted`): neither need be a deletion. Every
change goes to `handler` (called on the informer's thread: it must be quick; the controller's hands it off to its
loop), and every completed list to `on_listed` (the controller then sweeps its mirror of
what the cluster no longer has: objects deleted while nobody watched). Each new watch or list after the first counts in
`opsconsole_informer_restarts_total{resource,reason}`.

The handler gets each object as the API delivered it; the cache (`store.py`, the informer's base class) keeps what
`keep` makes of it (`slim.py`: the controller's informers drop managedFields and the last-applied annotation, and
keep a stub of each Event), packed (compact JSON bytes, unpacked on every read), or the object as delivered when
`keep` is None. A change's previous
state (`InformerEvent.old`), and the last state of an object a re-list finds gone, are what the cache kept. A list is
applied page by page, so no more than one page of whole objects is held at a time.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from urllib3.exceptions import HTTPError

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, metrics, supervise
from reconcilers.engine.controller.events import ADDED, DELETED, MODIFIED, InformerEvent, object_key
from reconcilers.engine.controller.slim import Keep
from reconcilers.engine.controller.store import ObjectStore

log = logging.getLogger(__name__)

Handler = Callable[[InformerEvent], None]
Listed = Callable[["Informer"], None]


class Informer(ObjectStore):
    """The cache and list+watch loop of one kind (all namespaces unless `namespace` is given). `keep`: what the
    cache keeps of each object, packed (None: the object as delivered); `index_uids`: keep the uid → key index
    (`uids`, `key_for_uid`)."""

    def __init__(
        self,
        api: Any,
        kind: ResourceKind,
        handler: Handler,
        *,
        namespace: str | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        min_backoff: float = 0.1,
        max_backoff: float = 10.0,
        on_listed: Listed | None = None,
        keep: Keep | None = None,
        index_uids: bool = True,
        cluster: str = DEFAULT_CLUSTER,
        label_selector: str | None = None,
    ) -> None:
        self.api = api
        self.label_selector = label_selector or None  # lists and watches only the objects it matches
        self.kind = kind
        self.cluster = cluster  # the cluster `api` reaches: its name prefixes the keys (object_key)
        self.handler = handler
        self.on_listed = on_listed
        self.namespace = namespace
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        super().__init__(keep=keep, index_uids=index_uids)

        self.resource_version = ""  # the last one seen: where a watch resumes
        self.last_event: tuple[float, dict[str, Any]] | None = None  # (arrival, Unix time; object) of the last one
        self.listed_at: datetime | None = None  # when the last complete list began (wall clock, UTC)
        self.synced = threading.Event()  # set after the first complete list
        self.lists = 0
        self.watches = 0
        self.watch_starts: deque[str] = deque(maxlen=100)  # the resourceVersion each watch started from
        self._need_list = True
        self._stop = threading.Event()
        self._stream: kube.WatchStream | None = None
        self._thread: supervise.Supervised | None = None
        self._backoff = 0.0
        self.resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural  # the metric label
        for reason in metrics.INFORMER_RESTART_REASONS:
            metrics.INFORMER_RESTARTS.labels(self.resource, reason)

    def __repr__(self) -> str:
        return f"<Informer {self.kind.plural}.{self.kind.group or 'core'}/{self.kind.version}>"

    # -- one step ------------------------------------------------------------------------------------------

    def step(self) -> int:
        """List when needed (first time, after 410), else one watch request until it ends. Returns how many
        changes were handed to the handler. Raises on errors other than 410 (the caller backs off)."""
        if self._need_list:
            return self.relist()
        return self.watch_once()

    def relist(self) -> int:
        """List every page, applying each to the cache as it comes (objects added or changed are reported), then
        report what the cache has that the list had not as deleted."""
        listed: set[str] = set()
        token: str | None = None
        started, t0 = datetime.now(UTC), time.monotonic()
        changes = 0
        while True:
            try:
                page = kube.list_objects(self.api, self.kind, self.namespace, limit=self.page_size,
                                         continue_token=token, label_selector=self.label_selector)
            except kube.ApiException as exc:
                if exc.status == 410 and token:  # the continue token expired: start over
                    listed, token, started = set(), None, datetime.now(UTC)
                    continue
                raise
            for obj in page.items:
                key = object_key(self.kind, obj, self.cluster)
                listed.add(key)
                changes += self._apply(ADDED, key, obj)
            if not page.continue_token:
                break
            token = page.continue_token
        for key, gone in self.absent_from(listed):
            changes += self._apply(DELETED, key, gone, relisted=True)
        self.resource_version = page.resource_version
        self._need_list = False
        self.lists += 1
        self.listed_at = started
        self.synced.set()
        log.info("%r: listed %d objects in %.2f s (%d changes, list %d)", self, len(listed), time.monotonic() - t0,
                 changes, self.lists)
        if self.on_listed is not None:
            try:
                self.on_listed(self)
            except Exception:
                log.exception("%r: the list callback failed", self)
        return changes

    def watch_once(self) -> int:
        """One watch request from the last resourceVersion; returns when the server ends it (or on stop)."""
        timeout = int(self.watch_timeout_seconds * (1 + random.random()))  # spread reconnects, as client-go
        self.watches += 1
        self.watch_starts.append(self.resource_version)
        try:
            stream = kube.watch_objects(
                self.api, self.kind, resource_version=self.resource_version, namespace=self.namespace,
                timeout_seconds=max(timeout, 1), label_selector=self.label_selector,
            )
        except kube.ApiException as exc:
            if exc.status == 410:
                self._expired()
                return 0
            raise
        with self._lock:
            self._stream = stream
        if self._stop.is_set():
            stream.close()
        changes = 0
        try:
            for event in stream:
                changes += self._on_watch_event(event)
            if not self._stop.is_set():
                self._restarted("ended")
        except kube.ResourceExpired:
            self._expired()
        except (HTTPError, OSError) as exc:  # the connection dropped mid-stream: resume where it broke
            if not self._stop.is_set():
                log.info("%r: watch broke after %d changes (%s); resuming from resourceVersion %s", self, changes,
                         _describe(exc), self.resource_version)
                self._restarted("broken")
        finally:
            stream.close()
            with self._lock:
                self._stream = None
        return changes

    def _expired(self) -> None:
        log.info("%r: resourceVersion %s expired (410 Gone): re-listing", self, self.resource_version)
        self._need_list = True
        self._restarted("expired")

    def _restarted(self, reason: str) -> None:
        """opsconsole_informer_restarts_total (best effort)."""
        try:
            metrics.INFORMER_RESTARTS.labels(self.resource, reason).inc()
        except Exception:
            log.debug("informer metric not updated", exc_info=True)

    def _on_watch_event(self, event: kube.WatchEvent) -> int:
        changes = 0
        if event.type in (ADDED, MODIFIED, DELETED):
            self.last_event = (time.time(), event.object)  # how late it came: engine.clusters.watch_lag
            changes = self._apply(event.type, object_key(self.kind, event.object, self.cluster), event.object)
        elif event.type != "BOOKMARK":
            log.warning("%r: unexpected watch event type %r", self, event.type)
        if event.resource_version:
            self.resource_version = event.resource_version
        return changes

    def _apply(self, etype: str, key: str, obj: dict[str, Any], *, relisted: bool = False) -> int:
        """Update the cache with one change and report it; 0 when it was no change (same resourceVersion).
        `relisted`: a DELETED made up for an object a re-list no longer returned (`InformerEvent.relisted`)."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        old = self.replace(etype == DELETED, key, obj)
        events: list[InformerEvent] = []
        if etype == DELETED:
            events.append(InformerEvent(DELETED, self.kind, obj, old, self.cluster, relisted=relisted))
        elif old is None:
            events.append(InformerEvent(ADDED, self.kind, obj, None, self.cluster))
        elif str(old["metadata"].get("uid") or "") != uid:  # deleted and re-created while we were not looking
            events.append(InformerEvent(DELETED, self.kind, old, old, self.cluster))
            events.append(InformerEvent(ADDED, self.kind, obj, None, self.cluster))
        elif old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
            events.append(InformerEvent(MODIFIED, self.kind, obj, old, self.cluster))
        for ev in events:
            try:
                self.handler(ev)
            except Exception:
                log.exception("%r: handler failed on %s %s", self, ev.type, key)
        return len(events)

    # -- the thread ----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Step until stopped, backing off exponentially on errors (reset by any success)."""
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                changes = self.step()
            except (kube.ApiException, kube.WatchError, HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    break
                self._backoff = min(self.max_backoff, max(self.min_backoff, self._backoff * 2))
                self._restarted("error")
                log.warning("%r: %s; retrying in %.1fs", self, _describe(exc), self._backoff)
                self._stop.wait(self._backoff)
                continue
            except Exception:
                if self._stop.is_set():
                    break
                self._backoff = self.max_backoff
                self._restarted("error")
                log.exception("%r: unexpected error; retrying in %.1fs", self, self._backoff)
                self._stop.wait(self._backoff)
                continue
            if changes or time.monotonic() - started > 1.0:
                self._backoff = 0.0
            elif not self._need_list:  # a watch that ended at once with nothing: do not spin
                self._backoff = min(self.max_backoff, max(self.min_backoff, self._backoff * 2))
                self._stop.wait(self._backoff)

    def start(self) -> Informer:
        """Run in a supervised daemon thread (`reconcilers.engine.supervise`: started again if it dies)."""
        self._stop.clear()
        name = f"informer-{self.kind.plural}" + (f".{self.kind.group}" if self.kind.group else "")
        self._thread = supervise.start(name, self.run)
        return self

    def signal_stop(self) -> None:
        """Ask the thread to stop and end its current watch, without waiting."""
        if self._thread is not None:
            self._thread.signal_stop()  # first: the run ending now is no death
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread: end the current watch and wait for it."""
        self.signal_stop()
        if self._thread is not None:
            self._thread.stop(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, kube.ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"

