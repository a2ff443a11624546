"""The informers of one controller: one per reconciled and owned kind, and one of core/v1 Events when the Events
archive is on; started when the controller becomes leader and stopped when it stops leading.

Owner kinds start first, so their caches (uid -> key) fill before the children's events arrive. The informers run
in threads and only talk HTTP and fill their caches; the handlers they call (routing.py) hand the rest to the loop.

What the caches keep (`slim=True`, the default; `slim.py`): of the reconciled and owned kinds, each object without
managedFields and the last-applied annotation; of Events, a stub (name, namespace, uid, resourceVersion, count).
Only the reconciled kinds keep the uid -> key index (the owner lookups and the mirror's sweep read it). With
`slim=False` every cache keeps the objects as delivered (bench/memory compares the two).

`primary_selector`: the informers of the reconciled kinds list and watch only the objects that label selector matches
(a controller shard's own keys, shards/labels.py); the owned kinds and Events stay unfiltered.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.engine.controller.informer import Handler, Informer, Listed
from reconcilers.engine.controller.kindmap import KindId, KindMap, kind_id
from reconcilers.engine.controller.slim import event_stub, slim

log = logging.getLogger(__name__)

#: what the events informer watches (core/v1: kubelet, controllers and the runner post these)
EVENTS = ResourceKind("", "v1", "events", "Event", True)


class InformerSet:
    """The informers of `kinds` (and of Events with `events=True`), built with `options` (Informer's keywords);
    `slim`: their caches keep only what is read from them (see the module docstring)."""

    def __init__(self, api: Any, kinds: KindMap, *, events: bool = False,
                 options: dict[str, Any] | None = None, slim: bool = True,
                 primary_selector: str | None = None) -> None:
        self.api, self.kinds, self.events, self.options = api, kinds, events, dict(options or {})
        self.slim, self.primary_selector = slim, primary_selector
        self.informers: dict[KindId, Informer] = {}
        self.events_informer: Informer | None = None

    def start(self, handle: Handler, on_listed: Listed, handle_event: Handler) -> None:
        """Build and start every informer (owner kinds first)."""
        order = sorted(self.kinds.kinds, key=lambda kid: kid not in self.kinds.primary)
        self.informers = {kid: Informer(self.api, self.kinds.kinds[kid], handle, on_listed=on_listed,
                                        **self._cache_options(kid in self.kinds.primary, slim),
                                        **self._selected(kid in self.kinds.primary), **self.options)
                          for kid in order}
        if self.events:
            self.events_informer = Informer(self.api, EVENTS, handle_event, **self._cache_options(False, event_stub),
                                            **self.options)
        for informer in self.all():
            informer.start()
        log.info("controller: informers started for %s", ", ".join(f"{g or 'core'}/{p}" for g, p in order))

    def _cache_options(self, primary: bool, keep: Any) -> dict[str, Any]:
        """What an informer's cache keeps: the uid index of a reconciled kind only, and `keep` when slim."""
        if not self.slim:
            return {}
        return {"keep": keep, "index_uids": primary}

    def _selected(self, primary: bool) -> dict[str, Any]:
        """The label selector of a reconciled kind's informer (none for the others)."""
        return {"label_selector": self.primary_selector} if primary and self.primary_selector else {}

    def all(self) -> list[Informer]:
        """Every informer, the events informer last."""
        return [*self.informers.values(), *([self.events_informer] if self.events_informer is not None else [])]

    def stop(self) -> None:
        """End all watches first, then wait for the threads."""
        informers = self.all()
        for informer in informers:
            informer.signal_stop()
        for informer in informers:
            informer.stop()
        self.events_informer = None

    def synced(self) -> bool:
        """Whether every informer of the watched kinds has completed its first list."""
        return all(inf.synced.is_set() for inf in self.informers.values())

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
        for kid in self.kinds.primary:
            informer = self.informers.get(kid)
            if informer is not None:
                keys.extend(informer.keys())
        return keys

    def key_for_uid(self, kind: ResourceKind, uid: str) -> str | None:
        """The key of the object of `kind` with `uid` in its informer's cache (None: not cached)."""
        informer = self.informers.get(kind_id(kind))
        return informer.key_for_uid(uid) if informer is not None and uid else None

    def annotations(self, reconciler: Reconciler, resource: Any) -> dict[str, Any] | None:
        """An object's annotations from its kind's informer cache (None when not cached)."""
        informer = self.informers.get(kind_id(reconciler.resource))
        obj = informer.get(resource.key) if informer is not None else None
        return ((obj or {}).get("metadata") or {}).get("annotations") or {} if obj is not None else None
