"""A run's telemetry (`run.Run`'s part 6): the child span of each part of the run, the wait before its claim on
its span, the attributes naming its object, and tail sampling of a run not traced in full
(`sampling.keep_notable`, whose kept span the run's record links to).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from django.conf import settings

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.types import Request
from reconcilers.engine import sampling
from reconcilers.engine.workqueue import Claim


class RunTelemetry:
    """The run's spans and tail sampling, mixed into `run.Run` (which sets these attributes)."""

    key: str
    claim: Claim
    reconciler: Reconciler
    request: Request
    t0: float
    t0_ns: int
    trace_id: str

    @staticmethod
    def _part(span: Any, name: str) -> Any:
        """A child span of the run's for one of its parts; nothing when the run is not traced in full."""
        if not span.is_recording():
            return contextlib.nullcontext()
        return sampling.tracer("opsconsole.reconcilers").start_as_current_span(name)

    def _queue_wait(self, span: Any) -> None:
        """The time before the run on its span: when its key became dirty and when this run claimed it (Redis's
        clock, seconds), and the wait between."""
        if not span.is_recording() or self.claim.claimed_at <= 0:
            return
        if self.claim.queued_at > 0:
            span.add_event("queued", timestamp=int(self.claim.queued_at * 1e9))
            span.set_attribute("opsconsole.queue.wait_seconds",
                               round(max(0.0, self.claim.claimed_at - self.claim.queued_at), 6))
        span.add_event("claimed", timestamp=int(self.claim.claimed_at * 1e9))

    def _attributes(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The span attributes naming the object."""
        meta = obj["metadata"]
        return {"opsconsole.kind": self.reconciler.resource.kind, "opsconsole.namespace": self.request.namespace,
                "opsconsole.name": self.request.name, "opsconsole.uid": meta.get("uid") or "",
                "opsconsole.generation": int(meta.get("generation") or 0)}

    def _keep_notable(self, result: str, error_class: str, token: str | None, attributes: dict[str, Any]) -> None:
        """Tail sampling (`sampling.keep_notable`); the record links to the span kept."""
        self.trace_id = sampling.keep_notable(
            f"reconcile {self.reconciler.resource.kind}", self.t0_ns, time.monotonic() - self.t0,
            float(getattr(settings, "OPSCONSOLE_TRACE_SLOW_SECONDS", 1.0)), result, error_class, token,
            {**attributes, "opsconsole.key": self.key, "opsconsole.result": result,
             "opsconsole.attempt": self.claim.failures + 1}) or self.trace_id
