"""The Events archive's owner resolver: which registered (mirrored) object an Event's involved object belongs to,
and where it sits under it (`lineage.Lineage`: hops from the root, the workload revision it belongs to).

An involved object that is itself mirrored resolves at once (one query per batch); any other is walked up its
controller ownerReferences, GETting each object not known yet, at most MAX_DEPTH hops, and every object on the way is
remembered (negative answers too) in a bounded LRU cache with a TTL (`lineage_cache.LineageCache`), so that steady
state costs no API call per Event. After a burst, the many new Pods and ReplicaSets of one kind in one namespace are
read with one LIST instead of a GET each (`owner_reads.OwnerReads`). The current revision of the workloads the
lineages name (`attribution.CurrentRevisions`) is read through the same GET.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from reconcilers.core.meta import controller_ref
from reconcilers.engine.healing.attribution import CurrentRevisions
from reconcilers.engine.healing.lineage import Lineage, ObjectRef, anchor_of
from reconcilers.engine.healing.lineage_cache import (
    CACHE_ENTRIES,
    CACHE_TTL_SECONDS,
    NEGATIVE_TTL_SECONDS,
    LineageCache,
)
from reconcilers.engine.healing.owner_reads import LIST_AT, Fetched, OwnerReads
from reconcilers.engine.sqljson import pairs_by_key
from reconcilers.models import Resource

#: how many ownerReference hops the resolver follows (Pod → ReplicaSet → Deployment → CR is 3)
MAX_DEPTH = 5


class OwnerResolver(LineageCache):
    """Which registered (mirrored) object an Event's involved object belongs to, by uid.

    `resolve(refs)` answers involved uid → the `Resource` id it is filed under (a deleted resource's row counts:
    its last Events are still filed under it). An involved object that is itself mirrored resolves at once (one
    query for the batch); any other is walked up its controller ownerReferences, GETting each object not known
    yet, at most MAX_DEPTH hops. Every object on the way is cached uid → its `Lineage` (the root uid, or None: no
    registered root; its hops from the root; the workload revision it belongs to; the namespace it was read in),
    in an LRU of `max_entries` with a TTL (`negative_ttl` for None); thread-safe. Hop by hop, the unknown objects
    of one kind in one namespace are read with one LIST when there are LIST_AT of them or more (`_prefetch_hops`).
    """

    def __init__(
        self,
        api: Any,
        *,
        max_entries: int = CACHE_ENTRIES,
        ttl: float = CACHE_TTL_SECONDS,
        negative_ttl: float = NEGATIVE_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        get: Callable[[ObjectRef], dict[str, Any] | None] | None = None,
        list_page: Callable[[ObjectRef, int], list[dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__(max_entries=max_entries, ttl=ttl, negative_ttl=negative_ttl, clock=clock)
        self.api = api
        self.reads = OwnerReads(api, get=get, list_page=list_page)
        #: the current revision of the workloads lineages name (`attribution`), read through the same GET
        self.revisions = CurrentRevisions(self._read_workload, clock=clock)
        self._clusters: dict[int, str] = {}  # Resource id -> its cluster (a row's cluster never changes)

    @property
    def api_calls(self) -> int:
        """Objects read from the API (tests, logs)."""
        return self.reads.api_calls

    def _walk(self, ref: ObjectRef, mirrored: Callable[[str], bool], fetched: Fetched | None = None) -> str | None:
        """Root uid of one object not mirrored itself (API reads unless `fetched` has it; caches the lineage of every
        object passed)."""
        path: list[tuple[ObjectRef, dict[str, Any] | None]] = []
        current = ref
        top: Lineage | None = None  # the lineage of the owner the walk stopped at
        for _ in range(MAX_DEPTH):
            obj = self.reads.read(current, fetched)
            path.append((current, obj))
            owner = controller_ref(obj) if obj is not None else None
            if owner is None or not owner.get("uid"):
                break
            owner_uid = str(owner["uid"])
            known = self.lineage(owner_uid)
            if known is not None:
                top = known
                break
            if mirrored(owner_uid):
                top = Lineage(owner_uid, 0)
                self.remember(owner_uid, owner_uid, hops=0)
                break
            current = ObjectRef.owner(owner, current.namespace)
        root = top.root if top is not None else None
        anchor = top.anchor if top is not None else None
        for i in range(len(path) - 1, -1, -1):  # from the top down: an anchor holds for everything below it
            step_ref, step_obj = path[i]
            anchor = anchor_of(step_ref, step_obj) or anchor
            hops = (top.hops if top is not None else 0) + len(path) - i
            self.remember(step_ref.uid, root, hops=hops, anchor=anchor if root is not None else None,
                          namespace=step_ref.namespace if step_obj is not None else None)
        return root

    def _read_workload(self, ref: ObjectRef) -> dict[str, Any] | None:
        """A workload as it is now, for its current revision (None: gone, replaced, or not granted)."""
        return self.reads.read(ref)

    def _prefetch_hops(self, level: list[ObjectRef], ids: dict[str, int],
                       looked_up: set[str]) -> Fetched:
        """The objects the walks of `level` will read, hop by hop, where `OwnerReads.prefetch` lists them; the owners
        met on the way are looked up in the mirror in one query per hop (into `ids`, their uids into `looked_up`)."""
        fetched: Fetched = {}
        for _ in range(MAX_DEPTH):
            if len(level) < LIST_AT:
                break
            self.reads.prefetch(level, fetched)
            owners: dict[str, ObjectRef] = {}
            for ref in level:
                obj = fetched.get(ref.uid)
                owner = controller_ref(obj) if obj is not None else None
                uid = str(owner.get("uid") or "") if owner is not None else ""
                if uid and uid not in fetched and uid not in ids and not self.cached(uid)[0]:
                    owners[uid] = ObjectRef.owner(owner, ref.namespace)
            if not owners:
                break
            ids.update(pairs_by_key(Resource, "uid", "id", set(owners)))
            looked_up.update(owners)
            level = [ref for uid, ref in owners.items() if uid not in ids]
        return fetched

    def clusters(self, resource_ids: Iterable[int]) -> dict[int, str]:
        """The cluster of each Resource row `resource_ids` names (those that exist), remembered (at most
        `max_entries`): a batch filed under known objects costs no query."""
        wanted = set(resource_ids)
        with self._lock:
            found = {pk: self._clusters[pk] for pk in wanted if pk in self._clusters}
        missing = wanted - set(found)
        if missing:
            read = pairs_by_key(Resource, "id", "cluster", missing)
            found.update(read)
            with self._lock:
                if len(self._clusters) + len(read) > self.max_entries:
                    self._clusters.clear()
                self._clusters.update(read)
        return found

    def resolve(self, refs: Iterable[ObjectRef]) -> dict[str, int]:
        """Involved uid → the id of the Resource row it is filed under, for the refs that have one."""
        refs = list({r.uid: r for r in refs}.values())
        if not refs:
            return {}
        roots: dict[str, str | None] = {}
        unknown: list[ObjectRef] = []
        for ref in refs:
            known, root = self.cached(ref.uid)
            if known:
                roots[ref.uid] = root
            else:
                unknown.append(ref)
        wanted = {r.uid for r in unknown} | {root for root in roots.values() if root}
        ids: dict[str, int] = pairs_by_key(Resource, "uid", "id", wanted)

        looked_up = set(wanted)  # uids the queries for `ids` looked for

        def mirrored(uid: str) -> bool:
            if uid in ids:
                return True
            if uid in looked_up:
                return False
            row = Resource.objects.filter(uid=uid).values_list("id", flat=True).first()
            if row is not None:
                ids[uid] = row
            return row is not None

        fetched = self._prefetch_hops([ref for ref in unknown if ref.uid not in ids], ids, looked_up)
        for ref in unknown:
            if ref.uid in ids:
                self.remember(ref.uid, ref.uid, hops=0)
                roots[ref.uid] = ref.uid
            else:
                roots[ref.uid] = self._walk(ref, mirrored, fetched)
        found_on_the_way = {root for root in roots.values() if root and root not in ids}  # cached owners' roots
        if found_on_the_way:
            ids.update(pairs_by_key(Resource, "uid", "id", found_on_the_way))
        out: dict[str, int] = {}
        for uid, root in roots.items():
            if root is None:
                continue
            if root not in ids:  # a cached root whose row is not there (yet, or any more)
                continue
            out[uid] = ids[root]
        return out
