"""Which generation of its registered object an archived Event is evidence about (issue 38).

The archive sets `KubeEvent.generation` (None: unattributed) and `KubeEvent.attribution` (how, or why not) for
each observation, from the involved object's `Lineage` (cached by the owner resolver) and the mirror's row of
the object it is filed under. The rule errs one way only: evidence may be filed under an *older* generation than
the one that produced it (or under none), never under a newer one.

- **The object itself** (`self`): the generation the record knows it reconciled, `observedGeneration` on the
  mirror. A generation written but not reconciled yet has applied nothing, so what is said about the object now
  is about the older one.
- **Below a workload** (`replicaset`, `controllerrevision`): a Pod or ReplicaSet under the object's Deployment, or a
  Pod of its StatefulSet, belongs to a revision (its ReplicaSet's pod template; the Pod's controller-revision-hash).
  The Event is about the object's observed generation when that revision is the one its workload makes *now*, read
  after the mirror row (a generation is observed only once its run applied its children, so the workload then
  shows that generation's template or a newer one's); otherwise it is evidence about an older revision, which
  no rule counts (`revision-not-current`). A generation that only changed the replica count keeps the ReplicaSet,
  so its Events are the current generation's; the rules count only those observed after it was applied.
- **A child without revisions** (`child`, such as the Deployment itself or a Service): the observed generation,
  only while the object is settled (observed == generation); else unattributed (`child-unsettled`).
- Anything else is unattributed: `unobserved` (no generation reconciled yet), `no-revision` (deeper, with no
  workload revision on the way), `workload-unread` (the workload could not be read), `lineage-unknown`.

Why not times: the API server's `creationTimestamp` has whole seconds, and a generation's `SpecRevision` is
written by the engine's clock after its run applied the children, so a ReplicaSet made by a generation's run is
usually dated in the same second as (and before) that generation's revision: no time comparison separates the two
generations without either filing the older one's ReplicaSet under the newer generation or losing the newer
one's evidence. The workload's current revision is causal.

Cost: no API call per Event. The lineage is cached by the resolver; the current revision of each workload met in a
batch is read at most once per (workload, observed generation) and `CURRENT_TTL_SECONDS` (one GET after the
object's generation moves on, or every 30 s while its children keep failing).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from reconcilers.engine.healing.lineage import Anchor, Lineage, ObjectRef, current_revision
from reconcilers.models import Resource

#: how long a workload's current revision read for one observed generation is trusted
CURRENT_TTL_SECONDS = 30.0
CURRENT_ENTRIES = 10000

SELF, CHILD = "self", "child"
UNOBSERVED = "unobserved"
CHILD_UNSETTLED = "child-unsettled"
NOT_CURRENT = "revision-not-current"
WORKLOAD_UNREAD = "workload-unread"
NO_REVISION = "no-revision"
LINEAGE_UNKNOWN = "lineage-unknown"

Attribution = tuple[int | None, str]  # (generation or None, how / why not)


class CurrentRevisions:
    """The revision each workload makes now (`lineage.current_revision`), read with `read` (the resolver's GET:
    None when gone or not granted), cached per (workload uid, the root's observed generation) for `ttl`."""

    def __init__(self, read: Callable[[ObjectRef], dict[str, Any] | None], *, ttl: float = CURRENT_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic, max_entries: int = CURRENT_ENTRIES) -> None:
        self.read = read
        self.ttl = ttl
        self.clock = clock
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[str, int], tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.reads = 0

    def get(self, anchor: Anchor, observed: int) -> str | None:
        """The current revision of `anchor`'s workload, as read after the root was observed at `observed`."""
        key = (anchor.workload.uid, observed)
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and entry[1] > self.clock():
                return entry[0]
        self.reads += 1
        value = current_revision(anchor.workload.kind, self.read(anchor.workload))
        if value is not None:
            with self._lock:
                self._cache[key] = (value, self.clock() + self.ttl)
                self._cache.move_to_end(key)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return value


def attribute(filed: Mapping[str, int], refs: Mapping[str, ObjectRef], lineages: Mapping[str, Lineage | None],
              revisions: CurrentRevisions) -> dict[str, Attribution | None]:
    """Involved uid → (generation or None, attribution) for the involved objects `filed` (uid → Resource id),
    by their `lineages` (see the module docstring); None for an Event to drop: its involvedObject names a namespace
    other than the one the object with that uid was found in (the root's, for a namespaced root), so that an Event
    written in one namespace with another namespace's uid is not filed there. One query for the mirror rows, then
    the workloads' current revisions (after it: the order is what makes the rule safe)."""
    rows: dict[int, tuple[int, int | None, str]] = {
        rid: (int(generation or 0), observed, namespace)
        for rid, generation, observed, namespace in Resource.objects.filter(id__in=set(filed.values()))
        .values_list("id", "generation", "observed_generation", "namespace")}
    out: dict[str, Attribution | None] = {}
    for uid, rid in filed.items():
        generation, observed, namespace = rows.get(rid, (0, None, ""))
        lineage = lineages.get(uid)
        expected = lineage.namespace if lineage is not None and lineage.namespace is not None else (namespace or None)
        if expected is not None and refs[uid].namespace != expected:
            out[uid] = None
            continue
        out[uid] = _one(lineage, generation, observed, revisions)
    return out


def _one(lineage: Lineage | None, generation: int, observed: int | None, revisions: CurrentRevisions) -> Attribution:
    if lineage is None or lineage.root is None:
        return None, LINEAGE_UNKNOWN
    if observed is None or observed < 1:
        return None, UNOBSERVED
    observed = min(observed, generation) if generation else observed
    if lineage.hops == 0:
        return observed, SELF
    if lineage.anchor is not None:
        current = revisions.get(lineage.anchor, observed)
        if current is None:
            return None, WORKLOAD_UNREAD
        if current != lineage.anchor.key:
            return None, NOT_CURRENT
        return observed, lineage.anchor.attribution
    if lineage.hops == 1:
        return (observed, CHILD) if observed == generation else (None, CHILD_UNSETTLED)
    return None, NO_REVISION
