"""The handoff of a controller shard: the controller's `Handoff` that lets through only what this shard acts on.

The informer handlers (routing.py), the periodic resync and the after-outage resync put keys, objects for the
object cache and mirror updates into the handoff whatever shard they belong to; this one keeps a key (and its
trigger, which it tags with `"shard": <id>` so that every run records which shard enqueued it), a reconciled
object's cache entry and its mirror update only when `ShardOwnership.owns` the key. Objects of owned kinds (the
children) go through: a child's owners may be anyone's, and the cache entry is the same whoever writes it.
`put_keys_as_leader` is the unfiltered way in, for the cluster-wide healing step the elected replica runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine.controller.events import object_key
from reconcilers.engine.controller.handoff import Handoff, MirrorUpdate, Why
from reconcilers.engine.shards.ownership import ShardOwnership


class ShardHandoff(Handoff):
    """A `Handoff` filtered by `ownership`; `primary_prefixes`: the key prefixes (`group/version/plural/`, the
    cluster's name in front outside the default cluster) of the reconciled kinds (other objects are children, let
    through); `cluster`: the cluster the controller watches."""

    def __init__(self, ownership: ShardOwnership, primary_prefixes: Iterable[str], *,
                 cluster: str = DEFAULT_CLUSTER, **options: Any) -> None:
        super().__init__(**options)
        self.ownership = ownership
        self.cluster = cluster
        self.primary_prefixes = tuple(primary_prefixes)
        self.filtered = 0  # keys left to other shards (tests, logs)

    def _tag(self, trigger: dict[str, Any] | None) -> dict[str, Any] | None:
        return {**trigger, "shard": self.ownership.shard} if trigger is not None else None

    def put_key(self, key: str, trigger: dict[str, Any] | None = None) -> None:
        if self.ownership.owns(key):
            super().put_key(key, self._tag(trigger))
        else:
            self.filtered += 1

    def put_keys(self, keys: list[str], triggers: dict[str, Why] | None = None) -> None:
        mine = [key for key in keys if self.ownership.owns(key)]
        self.filtered += len(keys) - len(mine)
        if mine:
            kept = {k: ([self._tag(t) for t in triggers[k][0]], triggers[k][1])
                    for k in mine if triggers and k in triggers}
            super().put_keys(mine, kept or None)

    def put_keys_as_leader(self, keys: list[str], triggers: dict[str, Why] | None = None) -> None:
        """Keys the cluster-wide healing step enqueues, whoever's they are (the workqueue keeps one run per key)."""
        super().put_keys(keys, triggers)

    def put_object(self, key: str, obj: dict[str, Any] | None) -> None:
        if not key.startswith(self.primary_prefixes) or self.ownership.owns(key):
            super().put_object(key, obj)

    def put_mirror(self, update: MirrorUpdate) -> None:
        meta = (update.obj or {}).get("metadata") or {}
        if not meta.get("name") or self.ownership.owns(object_key(update.kind, update.obj, self.cluster)):
            super().put_mirror(update)
