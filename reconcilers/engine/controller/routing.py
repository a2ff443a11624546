"""What the informer threads call: each event filtered (events.py) into what the loop does with it, through the
handoff: the object for the object cache (before its key), the keys to enqueue (an owned child's owners'), the
mirror update, the Event for the archive, and a sweep after each (re-)list. Each key goes with its trigger
(`reconcilers.engine.triggers`): the event, the fields that changed and the field manager that wrote them. Any
thread; it touches neither Redis nor the database.
"""

from __future__ import annotations

from collections.abc import Callable

from reconcilers.core.meta import AUTO_ROLLBACK, FLUX_REQUESTED_AT, RECONCILE_REQUESTED_AT, SUSPENDED, SUSPENDED_UNTIL
from reconcilers.engine import triggers
from reconcilers.engine.controller.archive import EventsArchive
from reconcilers.engine.controller.events import (
    DELETED,
    InformerEvent,
    annotation,
    child_changed,
    owner_keys,
    primary_wants_reconcile,
)
from reconcilers.engine.controller.handoff import Handoff, MirrorSweep, MirrorUpdate
from reconcilers.engine.controller.informer import Informer
from reconcilers.engine.controller.informers import InformerSet
from reconcilers.engine.controller.kindmap import KindMap, kind_id
from reconcilers.engine.leanobject import slim

#: the annotations whose change enqueues a reconciled object (events.primary_wants_reconcile)
WATCHED_ANNOTATIONS = (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT, SUSPENDED, SUSPENDED_UNTIL, AUTO_ROLLBACK)


def primary_trigger(event: InformerEvent) -> dict:
    """The trigger of an event of a reconciled object: a manual request (the reconcile-requested-at annotation
    set to a new token), else the event with what changed."""
    if event.type != DELETED:
        for name in (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT):
            token = annotation(event.obj, name)
            if token and token != annotation(event.old, name):
                return triggers.manual_trigger(token)
    fields = triggers.primary_fields(event.obj, event.old, WATCHED_ANNOTATIONS) if event.type == "MODIFIED" else []
    return triggers.event_trigger(event.type, event.kind.kind, event.obj, event.old, role=triggers.SELF,
                                  fields=fields)


class EventRouter:
    """Routes informer events into `handoff`. `mirror`: mirror updates are handed off; `object_cache`: objects
    are; `archive`: the Events archive (None: off), told whose child each owned object is; `observe`: told each
    reconciled object's event before it is routed (a controller shard's ownership, shards/ownership.py)."""

    def __init__(self, handoff: Handoff, kinds: KindMap, informers: InformerSet, *, mirror: bool,
                 object_cache: bool, archive: EventsArchive | None,
                 observe: Callable[[InformerEvent], None] | None = None) -> None:
        self.handoff, self.kinds, self.informers, self.archive = handoff, kinds, informers, archive
        self.mirror, self.object_cache = mirror, object_cache
        self.observe = observe  # told every reconciled object's event first (a controller shard places its key)

    def handle(self, event: InformerEvent) -> None:
        """Filter one informer event of a watched kind into keys to enqueue and a mirror update."""
        kid = kind_id(event.kind)
        if kid in self.kinds.primary:
            if self.observe is not None:
                self.observe(event)
            if self.object_cache and event.key:  # before its key: the loop writes the objects, then enqueues
                self.handoff.put_object(event.key, None if event.type == DELETED else event.obj)
            if primary_wants_reconcile(event):
                self.handoff.put_key(event.key, primary_trigger(event))
            if self.mirror and event.uid:
                self.handoff.put_mirror(MirrorUpdate(event.kind, event.uid, event.obj, event.type == DELETED,
                                                     self.kinds.reconciler_of.get(kid)))
        owners = self.kinds.owners_of.get(kid)
        if owners:
            if self.archive is not None:
                self.archive.hint(event, owners)
            if self.object_cache and kid not in self.kinds.primary and event.key:  # a child: before its owner's key
                # without managedFields and the last-applied annotation: nothing reads them from a child's entry
                self.handoff.put_object(event.key, None if event.type == DELETED else slim(event.obj))
            if child_changed(event):
                keys = sorted(owner_keys(event, owners, self.informers.key_for_uid))
                trigger = triggers.event_trigger(
                    event.type, event.kind.kind, event.obj, event.old, role=triggers.CHILD,
                    fields=triggers.child_fields(event.obj, event.old) if event.type == "MODIFIED" else []
                ) if keys else None
                for key in keys:
                    self.handoff.put_key(key, trigger)

    def handle_event(self, event: InformerEvent) -> None:
        """An informer event of core/v1 Events: handed to the archive. A deletion is not: the archive keeps what
        Kubernetes lets expire."""
        if event.type != DELETED and event.uid:
            self.handoff.put_event(event.uid, (event.obj, event.old))

    def listed(self, informer: Informer) -> None:
        """An informer completed a list: a reconciled kind's mirror and object cache, and an owned kind's object
        cache, are swept in the loop."""
        kid = kind_id(informer.kind)
        if informer.listed_at is not None and (((self.mirror or self.object_cache) and kid in self.kinds.primary)
                                               or (self.object_cache and kid in self.kinds.owners_of)):
            self.handoff.put_sweep(MirrorSweep(kid, informer.listed_at))
