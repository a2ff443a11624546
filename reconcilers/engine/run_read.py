"""A run's part 1, Read (`run.Run`): the object and its state on record (`objectcache.read`: the claim's cached
object, or a GET), and the runs that end there, before their reconcile: a GET that fails is recorded as a failed
run without an observed object and retried with backoff, a 404 marks the mirror deleted, and a key whose cluster
this process cannot reach is recorded failed and forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Request
from reconcilers.engine import kube, metrics, objectcache, recording
from reconcilers.engine.healing import state as healing_state
from reconcilers.engine.step import QueueAction
from reconcilers.engine.workqueue import Claim, WorkQueue

log = logging.getLogger("reconcilers.engine.run")


class NotRead(Exception):
    """The run ends before its reconcile: its object could not be read (`result` 'error') or is gone ('success')."""

    def __init__(self, result: str) -> None:
        super().__init__(result)
        self.result = result


class ObjectRead:
    """The run's read and its unobserved ends, mixed into `run.Run` (which sets these attributes and has
    `_retry` from `run_queue.QueueActions`, `_keep_notable` from `run_telemetry.RunTelemetry`)."""

    key: str
    claim: Claim
    queue: WorkQueue
    reconciler: Reconciler
    request: Request
    error_class: str
    trace_id: str
    read_from: str
    _retry: Callable[..., float]
    _keep_notable: Callable[[str, str, str | None, dict[str, Any]], None]
    _run_record: Callable[..., recording.RunRecord]

    def _read(self, api: Any) -> tuple[dict[str, Any], healing_state.RecordedState | None]:
        """The object and its state on record (`objectcache.read`: the cache's object, or a GET, `_get`)."""
        obj, state, self.read_from = objectcache.read(
            self.claim.cached, lambda: self._get(api), lambda uid: healing_state.resource_state(uid, head=True))
        metrics.OBJECT_READS.labels(self.reconciler.name, self.read_from).inc()
        return obj, state

    def _get(self, api: Any) -> dict[str, Any]:
        """GET the live object: a failure is recorded and retried, a 404 marks the mirror deleted (`NotRead`)."""
        rec = self.reconciler
        try:
            obj = kube.get_object(api, rec.resource, self.request.namespace or None, self.request.name)
        except Exception as exc:
            self.error_class = "ApiError" if isinstance(exc, kube.ApiException) else type(exc).__name__
            delay = self._retry(QueueAction.BACKOFF)
            log.warning("GET %s failed (%s); retrying in %.3fs", self.key, exc, delay)
            self._record_unobserved(f"GET failed: {exc}"[:2000])
            raise NotRead("error") from exc
        if obj is None:
            recording.resource_mirror_gone(self.key)
            self.queue.forget(self.key)
            raise NotRead("success")
        return obj

    def _unreachable_cluster(self, exc: Exception) -> str:
        """The key's cluster is not registered, was removed or cannot be reached through its context: the run is
        recorded failed with why, and the key forgotten (no retry: a new event of that cluster enqueues it again
        once its controller runs)."""
        self.error_class = "UnknownCluster"
        log.error("%s: %s", self.key, exc)
        self._record_unobserved(f"cluster {self.request.cluster!r}: {exc}"[:2000])
        self.queue.forget(self.key)
        return "error"

    def _record_unobserved(self, message: str) -> None:
        """The run that could not read its object is on record too (best effort: the database may be away)."""
        if not self.trace_id:
            self._keep_notable("error", self.error_class, None, {"opsconsole.error": message[:500]})
        try:
            recording.run_record_unobserved(self._run_record("error", self.error_class, message))
        except Exception:
            log.warning("could not record the failed run of %s", self.key, exc_info=True)
