"""The object cache: the controller's newest view of each reconciled object, kept in Redis for the workers.

A run used to start with a GET of its object, though the controller's informer had just seen it (controller-runtime's
workers read from the informer cache for the same reason). The cache lives in the workqueue's Redis
(`WorkQueue.cache_objects`, a hash under the queue's prefix, key → `<resourceVersion> <object JSON>`):

- The controller writes every object its informers of the reconciled kinds report, and removes a deleted one, before
  it enqueues any key of the same batch: a key is never claimed before the object that queued it is in the cache.
  After each (re-)list it prunes the entries of that kind the cluster no longer has.
- A worker's claim returns the cached object in the same script (no round trip of its own). The run takes it only
  when it is `usable`: not being deleted (the finalizer's steps read the live object), and at least as new as the
  resourceVersion the record last saw (the mirror row, which a run's record moves to the version its status write
  made): a cache behind the record (the run before wrote the object and the controller's watch has not delivered
  it yet, or the controller is away) is read again with a GET. A stale object that gets past this is caught where it
  would do harm, as with controller-runtime's informer cache: the status write carries the resourceVersion read
  (409 → GET, retry), and the controller enqueues the key again once its watch delivers the change.
- Only the controller writes it, so the cache is exactly what a watch delivered: while no controller watches, the
  record moves ahead of it and runs GET their objects.
- An entry only moves forward: a version older than the stored one is not stored (numeric resourceVersions are
  compared; opaque ones replace).

Children (the kinds a reconciler `owns`) are cached the same way, for `Context.apply_child`, which sends no apply
that would change nothing (`reconcilers.engine.childcache`). They are read only while a controller says its informers
keep the cache (`WorkQueue.cache_live`, renewed every few seconds): without a watch the cache would not see a child
someone else changed. A run of an object with no phase on record yet (its first) looks none up: its children are
not there yet, and an apply is always safe. A child a run does apply moves its entry forward to the apply's answer
(`WorkQueue.cache_refresh`), so the cache is never behind the run's own writes; only the controller adds and removes
entries, so a write racing a deletion cannot bring a deleted child back.

What a child's entry holds is the child without managedFields and the last-applied annotation
(`reconcilers.engine.leanobject`: nothing reads them there; a reconciled object's entry is the object whole, the
run reads its managedFields). The cache is bounded: at most `OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES` entries (default
MAX_ENTRIES; 0: no cap). Past it, a key with no entry yet gets none (`reconcilers.engine.workqueue.cache`; counted
in `opsconsole_object_cache_skipped_total`): its runs GET their object and its applies are sent, as with the cache
off.

`OPSCONSOLE_OBJECT_CACHE` (default on) turns it off: the controller writes nothing, every run GETs its object, and
every child is applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from django.conf import settings

from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join
from reconcilers.engine import jsonfast
from reconcilers.engine.leanobject import slim

#: how a run read its object (the span attribute `opsconsole.read` and the metric's `source` label)
CACHE, API, STALE = "cache", "api", "stale"

#: the object cache's entries at most, by default (OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES): a fleet of 50,000 objects
#: with three children each fits; at the 1-3 KiB an entry takes in Redis (bench/memory), about 0.6 GB at most
MAX_ENTRIES = 250_000


def enabled() -> bool:
    """settings.OPSCONSOLE_OBJECT_CACHE (default True)."""
    return bool(getattr(settings, "OPSCONSOLE_OBJECT_CACHE", True))


def max_entries() -> int:
    """settings.OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES (default MAX_ENTRIES; 0: no cap)."""
    return max(0, int(getattr(settings, "OPSCONSOLE_OBJECT_CACHE_MAX_ENTRIES", MAX_ENTRIES)))


def resource_version(obj: dict[str, Any]) -> str:
    """The object's metadata.resourceVersion ('' when it has none)."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def encode(obj: dict[str, Any]) -> tuple[str, bytes]:
    """(resourceVersion, the object as compact JSON): what the cache stores."""
    return resource_version(obj), jsonfast.dumps(obj)


def encode_child(obj: dict[str, Any]) -> tuple[str, bytes]:
    """`encode` of a child as its entry holds it: without managedFields and the last-applied annotation."""
    return encode(slim(obj))


def decode(raw: str | bytes) -> dict[str, Any] | None:
    """A cached entry (`<resourceVersion> <JSON>`) as the object; None for '' or anything unreadable."""
    _rv, _, body = raw.partition(b" " if isinstance(raw, bytes) else " ")
    if not body:
        return None
    try:
        obj = jsonfast.loads(body)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) else None


def not_older(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is at least `than`: numeric ones compared, opaque ones only when equal."""
    if version.isdigit() and than.isdigit():
        return int(version) >= int(than)
    return version == than


def usable(obj: dict[str, Any], recorded_version: str) -> bool:
    """Whether a run may take the cached `obj` instead of a GET: not being deleted, and not older than the
    resourceVersion on record ('' when nothing is recorded yet)."""
    if obj["metadata"].get("deletionTimestamp"):
        return False
    return not recorded_version or not_older(resource_version(obj), recorded_version)


class ChildCache:
    """`childcache.ChildCache` on the workqueue's object cache: `get` while a controller keeps the cache, `put`
    moves an existing entry forward to an object the run wrote. The keys asked for are within `cluster` (five
    parts); the cache's are the workqueue's (the cluster's name in front outside the default cluster)."""

    def __init__(self, queue: Any, cluster: str = DEFAULT_CLUSTER) -> None:
        self.queue = queue
        self.cluster = cluster

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached child under `key`, or None (no entry, unreadable, or no controller keeps the cache)."""
        return decode(self.queue.cached_child(key_join(self.cluster, key)))

    def put(self, key: str, obj: dict[str, Any]) -> None:
        """Move `key`'s entry forward to `obj` (only an entry that exists, only to a newer version)."""
        self.queue.cache_refresh(key_join(self.cluster, key), *encode_child(obj))


class Recorded(Protocol):
    """What `read` needs of the state on record: the newest resourceVersion of the object the record has seen."""

    resource_version: str


R = TypeVar("R", bound=Recorded)


def read(cached: bytes | str | None, get: Callable[[], dict[str, Any]], recorded: Callable[[str], R | None]
         ) -> tuple[dict[str, Any], R | None, str]:
    """A run's object and its state on record (`recorded(uid)`), and where the object came from (CACHE, API or
    STALE). The object `cached` with the claim is taken when the cache is on and it is `usable`; else `get()` (the
    live object). A cached object older than the record's version is read again with `get()` (STALE), and, when
    that finds another object of the same name (deleted and made again meanwhile), its own state on record."""
    obj = decode(cached) if cached and enabled() else None
    if obj is not None and usable(obj, ""):
        source = CACHE
    else:
        obj, source = get(), API
    state = recorded(obj["metadata"]["uid"])
    if source == CACHE and state is not None and not usable(obj, state.resource_version):
        uid = obj["metadata"]["uid"]
        obj, source = get(), STALE  # the cache fell behind the record: the live one
        if obj["metadata"]["uid"] != uid:  # deleted and made again meanwhile: another record
            state = recorded(obj["metadata"]["uid"])
    return obj, state, source


def child_cache(queue: Any, recorded: str | None, cluster: str = DEFAULT_CLUSTER) -> ChildCache | None:
    """The children's cache a run's applies consult (`ChildCache` on `queue`, of the run's `cluster`), or None while
    the cache is off, and for a run of an object with no phase on record yet (its first): its children are not
    there yet (in a burst, half of all lookups would find nothing) and an apply is always safe."""
    return ChildCache(queue, cluster) if recorded and enabled() else None
