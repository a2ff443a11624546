"""The controller's default collaborators, bound to the real backends: the workqueue and object cache
(`reconcilers.engine.dispatch`, `objectcache`), the Resource mirror and its deletions (`reconcilers.engine.recording`),
the audit checkpoint (`reconcilers.engine.checkpoint`) and the Events archive (`healing.archive`).

Only the composition root (wiring.py) imports this module; tests pass doubles instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from django.db import transaction

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import dispatch, objectcache, recording, triggers
from reconcilers.engine.checkpoint import checkpoint_write as _checkpoint_write
from reconcilers.engine.controller.dbconn import close_old_db_connections
from reconcilers.engine.controller.handoff import EventPair, MirrorUpdate
from reconcilers.engine.healing.archive import OwnerResolver, events_archive
from reconcilers.models import Resource

#: how a deletion seen by a watch is described in its transitions' message
DELETED_EVENT = "deleted from the cluster (the controller saw it go)"

Objects = dict[str, dict[str, Any] | None]


def events_writer(api: Any) -> Callable[[list[EventPair]], int]:
    """healing.archive.events_archive with an OwnerResolver of this controller's (its cache lives as long), as the
    writer's `resolver`."""
    resolver = OwnerResolver(api)

    def write(batch: list[EventPair]) -> int:
        close_old_db_connections()
        return events_archive(batch, resolver)

    write.resolver = resolver  # type: ignore[attr-defined]
    return write


def checkpoint_write(api: Any) -> Any:
    """A signed checkpoint of the audit record (reconcilers.engine.checkpoint)."""
    close_old_db_connections()
    return _checkpoint_write(api)


def enqueue_many(keys: list[str]) -> list[str]:
    """The keys into the workqueue in one round trip; those newly added."""
    return dispatch.enqueue_many(keys)


def note_triggers(why: dict[str, str]) -> None:
    """The keys' triggers into the workqueue (`WorkQueue.note`), before the keys are added."""
    dispatch.get_queue().note(why, triggers.BOUND)


def cache_entries(objects: Objects) -> dict[str, tuple[str, bytes] | None]:
    """The objects as object-cache entries (`reconcilers.engine.objectcache`); None removes a deleted one."""
    return {key: objectcache.encode(obj) if obj is not None else None for key, obj in objects.items()}


def cache_write(objects: Objects) -> None:
    """The objects into the object cache, deleted ones out of it."""
    dispatch.get_queue().cache_objects(cache_entries(objects))


def cache_and_enqueue(objects: Objects, keys: list[str]) -> list[str]:
    """`cache_write` and `enqueue_many` in one workqueue round trip (objects first)."""
    return dispatch.cache_and_enqueue(cache_entries(objects), keys)


def cache_prune(prefix: str, present: list[str]) -> None:
    """The object cache's entries under `prefix` that are not `present` removed."""
    dispatch.get_queue().cache_prune(prefix, present)


def cache_live(ttl: float | None) -> None:
    """Say that the object cache is kept for `ttl` seconds (None: no longer)."""
    dispatch.get_queue().cache_live(ttl)


def queue_epoch(candidate: str) -> str:
    """The workqueue's epoch (WorkQueue.epoch: changes only when Redis lost the queue's state)."""
    return dispatch.get_queue().epoch(candidate)


def object_cache_enabled() -> bool:
    """Whether the workers read the object cache (objectcache.enabled)."""
    return objectcache.enabled()


def pump() -> int:
    """Release the delayed and expired keys (dispatch.pump)."""
    return dispatch.pump()


def mirror_write(updates: list[MirrorUpdate], cluster: str = DEFAULT_CLUSTER) -> None:
    """The batch of `cluster`'s objects, atomically: live objects upserted (one statement on PostgreSQL), deleted
    ones recorded deleted (their kind's reconciler known) or only marked deleted."""
    gone = [recording.Deletion(u.reconciler, u.uid, u.obj, DELETED_EVENT, cluster) for u in updates
            if u.deleted and u.reconciler is not None]
    # live objects only (the usual batch): one statement on PostgreSQL, which needs no transaction around it
    with transaction.atomic() if any(u.deleted for u in updates) else nullcontext():
        recording.resource_mirror_write([(u.kind, u.obj) for u in updates if not u.deleted],
                                        [u.uid for u in updates if u.deleted and u.reconciler is None],
                                        cluster=cluster)
        recording.resource_deletions_record(gone)


def mirror_versions(reconciler: Reconciler, cluster: str = DEFAULT_CLUSTER) -> dict[str, str]:
    """The resourceVersion last recorded of each live mirror row of `reconciler`'s kind in `cluster`, by uid (a
    hot standby's takeover hands off the objects whose version differs)."""
    kind = reconciler.resource
    rows = Resource.objects.filter(cluster=cluster, group=kind.group, plural=kind.plural, deleted=False)
    return dict(rows.values_list("uid", "resource_version").iterator(chunk_size=5000))


def mirror_sweep(reconciler: Reconciler, present: set[str], namespace: str | None, listed_at: Any,
                 cluster: str = DEFAULT_CLUSTER) -> list[str]:
    """Record as deleted the live mirror rows of `reconciler`'s kind in `cluster` not `present`
    (recording.resource_mirror_sweep: never a row of another cluster)."""
    return recording.resource_mirror_sweep(reconciler, present, namespace=namespace, listed_at=listed_at,
                                           cluster=cluster)


def depth_record(depth: int) -> None:
    """The workqueue's total depth into its history (the console's workers page)."""
    dispatch.get_queue().record_depth(depth, time.time())


def queue_depths() -> dict[str, Any]:
    """The workqueue's per-kind depths."""
    return dispatch.get_queue().depths()
