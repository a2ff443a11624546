"""Who the controller shards are: one coordination.k8s.io/v1 Lease per shard, `opsconsole-shard-<id>`.

A replica is shard `<id>` while it holds that Lease: it holds and renews it exactly as the leader holds the
controller's Lease (`controller.leader.LeaderElector`: conditional writes, renew deadline < lease duration), so
two replicas started with the same shard id never both act as it — the second waits as its standby. Shards
that are not configured ahead are fine: a new id is a new Lease.

The others read the membership from the same Leases (`ShardMembers`): a shard counts while its Lease names a
holder and was seen to change within its `leaseDurationSeconds`, judged on the reader's own monotonic clock from
when it observed the change (never by comparing another host's renewTime with this host's wall clock, as
client-go judges a leader's Lease). A shard that stops cleanly releases its Lease (holder cleared) and leaves
at once; one that dies leaves a lease duration after its last renewal was seen.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE, LeaderElector
from reconcilers.engine.shards.ring import Ring

SHARD_LEASE_PREFIX = "opsconsole-shard-"
#: a shard id: what a Lease name may end with (a DNS-1123 label, the prefix leaving room for 46 characters)
SHARD_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,44}[a-z0-9])?$")


def shard_lease_name(shard: str) -> str:
    """The Lease a shard is held by; ValueError naming the rule when the id cannot be part of a Lease name."""
    if not SHARD_ID.match(shard):
        raise ValueError(f"shard id {shard!r}: lowercase letters, digits and '-', at most 46, starting and "
                         "ending with a letter or digit")
    return f"{SHARD_LEASE_PREFIX}{shard}"


def shard_elector(api: Any, shard: str, *, namespace: str, identity: str | None = None,
                  lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                  clock: Callable[[], float] = time.monotonic) -> LeaderElector:
    """The candidate for shard `shard`'s Lease: this replica acts as the shard while `is_leader`."""
    return LeaderElector(api, identity=identity, name=shard_lease_name(shard), namespace=namespace,
                         lease_duration=lease_duration, renew_deadline=renew_deadline, retry_period=retry_period,
                         clock=clock)


class ShardMembers:
    """The live shards, read from their Leases in `namespace` every `step()` (see the module)."""

    def __init__(self, api: Any, namespace: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.namespace = namespace
        self.clock = clock
        self._lock = threading.Lock()
        # shard → (resourceVersion seen, when we saw it change, its holder, its lease duration)
        self._seen: dict[str, tuple[str, float, str, float]] = {}
        self._live: tuple[str, ...] = ()
        self._annotations: dict[str, dict[str, str]] = {}  # shard → its Lease's annotations, as last listed
        self.changes = 0  # how many times the live set changed (a caller re-assigns its keys when it moves)

    def step(self) -> tuple[str, ...]:
        """List the shard Leases, note which changed, and answer the live shards (sorted)."""
        now = self.clock()
        leases = kube.list_objects(self.api, LEASE, self.namespace).items
        names = {}
        for lease in leases:
            name = str(lease["metadata"].get("name") or "")
            if name.startswith(SHARD_LEASE_PREFIX):
                names[name[len(SHARD_LEASE_PREFIX):]] = lease
        with self._lock:
            for shard, lease in names.items():
                rv = str(lease["metadata"].get("resourceVersion") or "")
                spec = lease.get("spec") or {}
                holder = str(spec.get("holderIdentity") or "")
                duration = float(spec.get("leaseDurationSeconds") or 0)
                before = self._seen.get(shard)
                observed_at = before[1] if before is not None and before[0] == rv else now
                self._seen[shard] = (rv, observed_at, holder, duration)
                self._annotations[shard] = dict(lease["metadata"].get("annotations") or {})
            for shard in set(self._seen) - set(names):  # the Lease was deleted
                del self._seen[shard]
                self._annotations.pop(shard, None)
            live = tuple(sorted(shard for shard, (_, at, holder, duration) in self._seen.items()
                                if holder and now < at + duration))
            if live != self._live:
                self._live = live
                self.changes += 1
            return live

    @property
    def live(self) -> tuple[str, ...]:
        """The live shards as of the last step."""
        with self._lock:
            return self._live

    def annotations(self, shard: str) -> dict[str, str]:
        """The annotations of a shard's Lease as last listed (empty: none, or no such Lease)."""
        with self._lock:
            return dict(self._annotations.get(shard) or {})

    def next_expiry(self) -> float:
        """The monotonic instant the next live shard expires unless its Lease is seen renewed (inf: none)."""
        with self._lock:
            return min((at + duration for _, at, holder, duration in self._seen.values() if holder),
                       default=math.inf)

    def ring(self) -> Ring | None:
        """The ring of the live shards (None while there is none)."""
        live = self.live
        return Ring(live) if live else None
