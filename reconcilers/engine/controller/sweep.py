"""After every (re-)list of a watched kind: record as deleted the mirror's live rows of a reconciled kind the
cluster no longer has (objects deleted while no controller watched), and prune the object cache entries the
(re-)list of a reconciled or owned kind no longer has — of the controller's own cluster only: its rows, and the
cache entries under its keys' prefix. A sweep that fails is tried again after SWEEP_RETRY_SECONDS.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reconcilers.core.clusters import key_join
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine.controller.dbconn import close_old_db_connections
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.informers import InformerSet
from reconcilers.engine.controller.kindmap import KindMap

log = logging.getLogger(__name__)

#: the pause before a mirror sweep that failed (the database away) is tried again
SWEEP_RETRY_SECONDS = 5.0

MirrorSweepFn = Callable[[Reconciler, set[str], str | None, Any], list[str]]


class Sweeps:
    """Runs the sweeps the informers handed off (`step`). `mirror_sweep` records a kind's rows deleted (None: the
    mirror is not written); `cache_prune` prunes the object cache (None: the object cache is not fed)."""

    def __init__(self, handoff: Handoff, informers: InformerSet, kinds: KindMap, *,
                 mirror_sweep: MirrorSweepFn | None, cache_prune: Callable[[str, list[str]], Any] | None,
                 clock: Callable[[], float]) -> None:
        self.handoff, self.informers, self.kinds, self.clock = handoff, informers, kinds, clock
        self.mirror_sweep, self.cache_prune = mirror_sweep, cache_prune
        self.swept = 0  # mirror rows recorded deleted by sweeps (tests and logs)
        self.retry_at = -float("inf")

    def step(self) -> bool:
        """Sweep each kind just (re-)listed against its informer's cache (the cluster, as of now); True when any
        sweep was handed off."""
        if self.clock() < self.retry_at:
            return False
        sweeps = self.handoff.take_sweeps()
        if not sweeps:
            return False
        close_old_db_connections()
        for i, sweep in enumerate(sweeps):
            informer = self.informers.informers.get(sweep.kind)
            if informer is None:
                continue
            try:
                if self.cache_prune is not None:  # entries of objects deleted while no controller watched
                    kind = informer.kind
                    self.cache_prune(key_join(informer.cluster, f"{kind.group}/{kind.version}/{kind.plural}/"),
                                     informer.keys())
                gone = (self.mirror_sweep(self.kinds.reconciler_of[sweep.kind], informer.uids(), informer.namespace,
                                          sweep.listed_at)
                        if self.mirror_sweep is not None and sweep.kind in self.kinds.primary else [])
            except Exception:
                log.warning("controller: mirror sweep of %s failed; retrying in %.0fs", informer,
                            SWEEP_RETRY_SECONDS, exc_info=True)
                self.handoff.put_sweeps_back(sweeps[i:])
                self.retry_at = self.clock() + SWEEP_RETRY_SECONDS
                return True
            self.swept += len(gone)
            if gone:
                log.info("controller: %d %s gone from the cluster while unwatched, recorded deleted", len(gone),
                         informer.kind.plural)
        return True
