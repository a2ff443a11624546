"""The Kubernetes Events archive: the controller's writer of `KubeEvent` rows.

Events expire from Kubernetes (an hour by default); the controller watches core/v1 `events` and hands them to
`events_archive` in batches, as it does the Resource mirror. Each Event is filed under the registered object it is
about: the involved object itself when it is mirrored, else the object its *controller* ownerReferences lead up to
(Pod → ReplicaSet → Deployment → Memcached), found by `OwnerResolver`, which GETs each object it does not know yet
and remembers every answer (negative ones too) in a bounded LRU cache with a TTL, so that steady state costs no API
call per Event. Events about objects that lead to no registered object are dropped.

Cost per batch, whatever its size: one query for the mirrored uids, one for the counts archived before, one
INSERT (`recording_sql.insert_rows`, `bulk_create(ignore_conflicts=True)` in one JSON parameter on PostgreSQL:
the unique (event_uid, count) makes a repeated observation a no-op).

One row per observation (an Event's uid and its `count`). Its `occurrences` (the anomaly rules sum them) and its
times are bounded by what the controller observed, not by what the Event claims (`event_bounds`): at most the
number of states of the Event the watch delivered above the highest count archived before for that uid (a count
jump of thousands in one update is one occurrence), and no time later than when the controller archived it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from reconcilers.core.meta import controller_ref
from reconcilers.engine import kube
from reconcilers.engine.healing.event_bounds import observed_occurrences, observed_times
from reconcilers.engine.recording_sql import insert_rows, pairs_by_key
from reconcilers.models import KubeEvent, Resource

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

EventPair = tuple[dict[str, Any], dict[str, Any] | None]  # (the Event as seen, its previous state or None)


@dataclass(frozen=True)
class ObjectRef:
    """An object an Event is about (its involvedObject), or an owner on the way up."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def owner(cls, reference: dict[str, Any], namespace: str) -> ObjectRef:
        """The object an ownerReference names (owners live in their child's namespace)."""
        return cls(str(reference.get("apiVersion") or ""), str(reference.get("kind") or ""), namespace,
                   str(reference.get("name") or ""), str(reference.get("uid") or ""))


def involved_ref(event: dict[str, Any]) -> ObjectRef | None:
    """The Event's involvedObject (core/v1) or regarding (events.k8s.io/v1), None without a uid."""
    ref = event.get("involvedObject") or event.get("regarding") or {}
    uid = str(ref.get("uid") or "")
    if not uid:
        return None
    return ObjectRef(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""), str(ref.get("namespace") or ""),
                     str(ref.get("name") or ""), uid)


def written_where_it_is_about(event: dict[str, Any], ref: ObjectRef) -> bool:
    """Whether the Event is in its involved object's namespace (or, about a cluster-scoped object, in `default`,
    `kube-system` or none). kube-apiserver refuses anything else for an Event without `eventTime` but accepts it
    with one, so that whoever may create Events in one namespace could otherwise file them under another
    namespace's objects: the archive keeps only what kube-apiserver's legacy rule allows (issue 37)."""
    namespace = str((event.get("metadata") or {}).get("namespace") or "")
    if ref.namespace:
        return namespace == ref.namespace
    return namespace in ("", "default", "kube-system")


class OwnerResolver:
    """Which registered (mirrored) object an Event's involved object belongs to, by uid.

    `resolve(refs)` answers involved uid → the `Resource` id it is filed under (a deleted resource's row counts:
    its last Events are still filed under it). An involved object that is itself mirrored resolves at once (one
    query for the batch); any other is walked up its controller ownerReferences, GETting each object not known
    yet, at most MAX_DEPTH hops. Every object on the way is cached uid → root uid (or None: no registered root),
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
        self._cache: OrderedDict[str, tuple[str | None, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.api_calls = 0  # objects read from the API (tests, logs)

    # -- the cache -----------------------------------------------------------------------------------------

    def cached(self, uid: str) -> tuple[bool, str | None]:
        """(known, root uid or None) for one uid; an expired entry is unknown."""
        with self._lock:
            entry = self._cache.get(uid)
            if entry is None:
                return False, None
            if entry[1] <= self.clock():
                del self._cache[uid]
                return False, None
            self._cache.move_to_end(uid)
            return True, entry[0]

    def remember(self, uid: str, root: str | None) -> None:
        """Cache uid → root (None: leads to no registered object), evicting the least recently used."""
        ttl = self.ttl if root is not None else self.negative_ttl
        with self._lock:
            self._cache[uid] = (root, self.clock() + ttl)
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
        """Root uid of one object not mirrored itself (API reads unless `fetched` has it; caches every object
        passed)."""
        path: list[str] = []
        current = ref
        root: str | None = None
        for _ in range(MAX_DEPTH):
            path.append(current.uid)
            obj = self._read(current, fetched)
            owner = controller_ref(obj) if obj is not None else None
            if owner is None or not owner.get("uid"):
                break
            owner_uid = str(owner["uid"])
            known, cached_root = self.cached(owner_uid)
            if known:
                root = cached_root
                break
            if mirrored(owner_uid):
                root = owner_uid
                self.remember(owner_uid, owner_uid)
                break
            current = ObjectRef.owner(owner, current.namespace)
        for uid in path:
            self.remember(uid, root)
        return root

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
                self.remember(ref.uid, ref.uid)
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


# -- the writer ----------------------------------------------------------------------------------------------


def _when(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def event_count(event: dict[str, Any]) -> int:
    """The Event's count (core/v1 `count`, or events.k8s.io `series.count`), at least 1."""
    series = event.get("series") or {}
    try:
        return max(1, int(event.get("count") or series.get("count") or 1))
    except (TypeError, ValueError):
        return 1


def event_times(event: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """(first, last) time of an Event: lastTimestamp, series.lastObservedTime, eventTime, creation, in that order."""
    meta = event.get("metadata") or {}
    series = event.get("series") or {}
    created = meta.get("creationTimestamp")
    last = (_when(event.get("lastTimestamp")) or _when(series.get("lastObservedTime")) or _when(event.get("eventTime"))
            or _when(created))
    first = _when(event.get("firstTimestamp")) or _when(event.get("eventTime")) or _when(created) or last
    return first, last


def _cut(value: Any, length: int) -> str:
    return str(value or "")[:length]


def _row(event: dict[str, Any], ref: ObjectRef, resource_id: int, count: int, occurrences: int,
         now: datetime) -> KubeEvent:
    meta = event.get("metadata") or {}
    first, last = observed_times(*event_times(event), now)
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component") or ""
    return KubeEvent(
        resource_id=resource_id, event_uid=_cut(meta.get("uid"), 64), count=count, occurrences=occurrences,
        namespace=_cut(meta.get("namespace"), 63), name=_cut(meta.get("name"), 253), type=_cut(event.get("type"), 16),
        reason=_cut(event.get("reason"), 128), message=str(event.get("message") or ""),
        involved_api_version=_cut(ref.api_version, 253), involved_kind=_cut(ref.kind, 63),
        involved_namespace=_cut(ref.namespace, 63), involved_name=_cut(ref.name, 253),
        involved_uid=_cut(ref.uid, 64), source=_cut(source, 253), first_timestamp=first, last_timestamp=last,
        observed_at=now,
    )


def events_archive(batch: Sequence[EventPair], resolver: OwnerResolver) -> int:
    """Archive a batch of (Event, previous state or None): resolve where each is filed, drop those filed nowhere,
    those written in another namespace than their involved object's (`written_where_it_is_about`) and those whose
    count is already archived, and insert the rest in one statement, each bounded by what the watch observed
    (`event_bounds`: occurrences per state seen, no future time). The number of rows offered to the INSERT (a
    concurrent writer's rows are skipped by the unique constraint). Raises database errors (the controller keeps
    the batch and tries again)."""
    latest: dict[str, tuple[dict[str, Any], ObjectRef]] = {}
    seen: dict[str, set[int]] = {}  # uid -> the counts the watch delivered (the batch's states and their previous)
    for event, old in batch:
        uid = str((event.get("metadata") or {}).get("uid") or "")
        ref = involved_ref(event)
        if uid and ref is not None and written_where_it_is_about(event, ref):
            seen.setdefault(uid, set()).add(event_count(event))
            if old is not None and str((old.get("metadata") or {}).get("uid") or "") == uid:
                seen[uid].add(event_count(old))
            previous = latest.get(uid)
            if previous is None or event_count(event) >= event_count(previous[0]):
                latest[uid] = (event, ref)
    if not latest:
        return 0
    filed = resolver.resolve(ref for _event, ref in latest.values())
    latest = {uid: pair for uid, pair in latest.items() if pair[1].uid in filed}
    if not latest:
        return 0
    archived: dict[str, int] = pairs_by_key(KubeEvent, "event_uid", "count", latest, greatest=True)
    now = timezone.now()
    rows = []
    for uid, (event, ref) in latest.items():
        count = event_count(event)
        before = archived.get(uid, 0)
        if count <= before:
            continue  # this observation (or a later one) is archived already
        rows.append(_row(event, ref, filed[ref.uid], count, observed_occurrences(count, before, seen[uid]), now))
    insert_rows(rows)
    return len(rows)
