"""The Events archive's owner resolver: which registered (mirrored) object an Event's involved object belongs to,
and where it sits under it (`lineage.Lineage`: hops from the root, the workload revision it belongs to).

An involved object that is itself mirrored resolves at once (one query per batch); any other is walked up its
controller ownerReferences, GETting each object not known yet, at most MAX_DEPTH hops, and every object on the way is
remembered (negative answers too) in a bounded LRU cache with a TTL, so that steady state costs no API call per
Event. After a burst, the many new Pods and ReplicaSets of one kind in one namespace are read with one LIST instead
of a GET each. The current revision of the workloads the lineages name (`attribution.CurrentRevisions`) is read
through the same GET.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from reconcilers.core.meta import controller_ref
from reconcilers.engine import kube
from reconcilers.engine.healing.attribution import CurrentRevisions
from reconcilers.engine.healing.lineage import Anchor, Lineage, ObjectRef, anchor_of
from reconcilers.engine.sqljson import pairs_by_key
from reconcilers.models import Resource

log = logging.getLogger(__name__)

#: how many ownerReference hops the resolver follows (Pod → ReplicaSet → Deployment → CR is 3)
MAX_DEPTH = 5
#: resolver cache bounds: entries, and how long an answer is trusted (a negative one shorter)
CACHE_ENTRIES = 20000
CACHE_TTL_SECONDS = 600.0
NEGATIVE_TTL_SECONDS = 60.0
#: from this many unknown objects of one kind in one namespace on one hop of a batch, the resolver reads them with
#: one LIST (at most LIST_PAGE_FACTOR times as many objects, LIST_PAGE_MIN at least, in pages of LIST_PAGE; what it
#: lacks is GET) instead of a GET each: after a burst, the Events of hundreds of new Pods and ReplicaSets
LIST_AT = 8
LIST_PAGE_FACTOR = 4
LIST_PAGE_MIN = 500
LIST_PAGE = 100


class OwnerResolver:
    """Which registered (mirrored) object an Event's involved object belongs to, by uid.

    `resolve(refs)` answers involved uid → the `Resource` id it is filed under (a deleted resource's row counts:
    its last Events are still filed under it). An involved object that is itself mirrored resolves at once (one
    query for the batch); any other is walked up its controller ownerReferences, GETting each object not known
    yet, at most MAX_DEPTH hops. Every object on the way is cached uid → its `Lineage` (the root uid, or None: no
    registered root; its hops from the root; the workload revision it belongs to; the namespace it was read in),
    in an LRU of `max_entries` with a TTL (`negative_ttl` for None); thread-safe. Hop by hop, the unknown objects
    of one kind in one namespace are read with one LIST when there are LIST_AT of them or more (`_prefetch`).
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
        self.api = api
        self.max_entries = max_entries
        self.ttl = ttl
        self.negative_ttl = negative_ttl
        self.clock = clock
        self._get = get or self._get_live
        self._list = list_page or self._list_live
        self._cache: OrderedDict[str, tuple[Lineage, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.api_calls = 0  # objects read from the API (tests, logs)
        #: the current revision of the workloads lineages name (`attribution`), read through the same GET
        self.revisions = CurrentRevisions(self._read_workload, clock=clock)
        self._clusters: dict[int, str] = {}  # Resource id -> its cluster (a row's cluster never changes)

    # -- the cache -----------------------------------------------------------------------------------------

    def cached(self, uid: str) -> tuple[bool, str | None]:
        """(known, root uid or None) for one uid; an expired entry is unknown."""
        lineage = self.lineage(uid)
        return (False, None) if lineage is None else (True, lineage.root)

    def lineage(self, uid: str) -> Lineage | None:
        """The cached lineage of one uid (None: not known, or expired)."""
        with self._lock:
            entry = self._cache.get(uid)
            if entry is None:
                return None
            if entry[1] <= self.clock():
                del self._cache[uid]
                return None
            self._cache.move_to_end(uid)
            return entry[0]

    def remember(self, uid: str, root: str | None, *, hops: int | None = None, anchor: Anchor | None = None,
                 namespace: str | None = None) -> None:
        """Cache uid → root (None: leads to no registered object), `hops` from it (default: 0 for the root
        itself, else 1, a child the controller's informer names), the revision `anchor` it belongs to and the
        `namespace` it was read in, evicting the least recently used."""
        ttl = self.ttl if root is not None else self.negative_ttl
        lineage = Lineage(root, (0 if uid == root else 1) if hops is None else hops, anchor, namespace)
        with self._lock:
            self._cache[uid] = (lineage, self.clock() + ttl)
            self._cache.move_to_end(uid)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    # -- resolving -----------------------------------------------------------------------------------------

    def _get_live(self, ref: ObjectRef) -> dict[str, Any] | None:
        kind = kube.kind_for(self.api, ref.api_version, ref.kind)
        if kind is None:
            return None
        return kube.get_object(self.api, kind, ref.namespace if kind.namespaced else None, ref.name,
                               timeout=(2.0, 5.0))

    def _list_live(self, ref: ObjectRef, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` objects of `ref`'s kind in its namespace (`ref`'s name and uid unused), in pages of
        LIST_PAGE (the API server serves each page without holding up the others' requests for long)."""
        kind = kube.kind_for(self.api, ref.api_version, ref.kind)
        if kind is None:
            return []
        items: list[dict[str, Any]] = []
        token: str | None = None
        while len(items) < limit:
            page = kube.list_objects(self.api, kind, ref.namespace if kind.namespaced else None,
                                     limit=min(LIST_PAGE, limit - len(items)), continue_token=token,
                                     timeout=(2.0, 10.0))
            items.extend(page.items)
            token = page.continue_token
            if not token:
                break
        return items

    def _prefetch(self, level: list[ObjectRef], fetched: dict[str, dict[str, Any] | None]) -> None:
        """Read with one LIST per kind and namespace the objects of `level` not `fetched` yet, where LIST_AT or more
        of them share both; every object the page holds goes into `fetched` by uid. A LIST not granted or not
        served leaves them to their GETs."""
        groups: dict[tuple[str, str, str], list[ObjectRef]] = {}
        for ref in level:
            if ref.uid not in fetched:
                groups.setdefault((ref.api_version, ref.kind, ref.namespace), []).append(ref)
        for (api_version, kind, namespace), members in groups.items():
            if len(members) < LIST_AT:
                continue
            self.api_calls += 1
            try:
                items = self._list(ObjectRef(api_version, kind, namespace, "", ""),
                                   max(LIST_PAGE_MIN, LIST_PAGE_FACTOR * len(members)))
            except kube.ApiException as exc:
                if exc.status not in (403, 404, 405):
                    raise
                log.debug("event archive: %s in %s not listed: HTTP %s", kind, namespace, exc.status)
                continue
            for obj in items:
                uid = str((obj.get("metadata") or {}).get("uid") or "")
                if uid:
                    fetched[uid] = obj

    def _read(self, ref: ObjectRef, fetched: dict[str, dict[str, Any] | None] | None = None) -> dict[str, Any] | None:
        if fetched is not None and ref.uid in fetched:
            return fetched[ref.uid]
        self.api_calls += 1
        try:
            obj = self._get(ref)
        except kube.ApiException as exc:
            if exc.status not in (403, 404, 405):  # the API in trouble: the batch is tried again later
                raise
            # not granted, or nothing serves it: this object leads nowhere
            log.debug("event archive: %s %s/%s not read: HTTP %s", ref.kind, ref.namespace, ref.name, exc.status)
            return None
        if obj is None or str((obj.get("metadata") or {}).get("uid") or "") != ref.uid:
            return None  # gone, or another object under the same name now
        return obj

    def _walk(self, ref: ObjectRef, mirrored: Callable[[str], bool],
              fetched: dict[str, dict[str, Any] | None] | None = None) -> str | None:
        """Root uid of one object not mirrored itself (API reads unless `fetched` has it; caches the lineage of every
        object passed)."""
        path: list[tuple[ObjectRef, dict[str, Any] | None]] = []
        current = ref
        top: Lineage | None = None  # the lineage of the owner the walk stopped at
        for _ in range(MAX_DEPTH):
            obj = self._read(current, fetched)
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
        return self._read(ref)

    def _prefetch_hops(self, level: list[ObjectRef], ids: dict[str, int],
                       looked_up: set[str]) -> dict[str, dict[str, Any] | None]:
        """The objects the walks of `level` will read, hop by hop, where `_prefetch` lists them; the owners met on
        the way are looked up in the mirror in one query per hop (into `ids`, their uids into `looked_up`)."""
        fetched: dict[str, dict[str, Any] | None] = {}
        for _ in range(MAX_DEPTH):
            if len(level) < LIST_AT:
                break
            self._prefetch(level, fetched)
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
