"""The manual reconcile requests a run handles: picked up when the run starts, finished (succeeded or failed) in
the run's recording, with the older open requests of the same object. A request's row is created when it is
asked for (`reconcilers.services.reconcile_requests`, or `annotation_requests.annotation_request_ensure` for one
made with the object's annotation); every change here is guarded so that only rows still open move.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from reconcilers.engine.annotation_requests import annotation_request_ensure
from reconcilers.engine.recording_rows import RunRecord
from reconcilers.models import ReconcileRequest, ReconcileRun, RequestState, Resource, RunResult, Transition

#: results after which a handled manual request counts as succeeded (an error fails it)
_SUCCEEDED_RESULTS = {RunResult.SUCCESS, RunResult.REQUEUE, RunResult.REQUEUE_AFTER}


def request_taken_up(key: str, obj: dict[str, Any], annotation: str, token: str, *,
                     trace_id: str | None = None) -> list[str]:
    """A run takes up the manual request its object's annotation `annotation` asks for with `token`, in one call
    from the run: the request's row made when it has none yet (an annotation set by someone else than opsconsole:
    kubectl annotate, flux; `annotation_request_ensure`), its rows marked picked up, and, when `trace_id` (the
    run's trace, being recorded) is given, the traces the requests were made in other than the run's."""
    annotation_request_ensure(key, obj, annotation, token)
    requests_picked_up(key, token)
    return request_trace_ids(key, token, trace_id) if trace_id is not None else []


def requests_picked_up(key: str, token: str) -> None:
    """Mark the manual requests a run handles as picked up (guarded: only rows still `requested`)."""
    ReconcileRequest.objects.filter(key=key, token=token, state=RequestState.REQUESTED).update(
        state=RequestState.PICKED_UP, picked_up_at=timezone.now()
    )


def request_trace_ids(key: str, token: str, exclude: str) -> list[str]:
    """The traces the manual requests with `token` were made in, other than `exclude` (a request coalesced
    with a task already queued was made in another trace than the run's)."""
    return list(ReconcileRequest.objects.filter(key=key, token=token).exclude(trace_id__in=("", exclude))
                .values_list("trace_id", flat=True))


def request_handled(run: RunRecord, resource: Resource) -> ReconcileRequest | None:
    """The newest request with the token `run` handled, of `resource` or of its key (None: none on record)."""
    return (
        ReconcileRequest.objects.filter(token=run.request_token)
        .filter(Q(resource=resource) | Q(key=run.key))
        .order_by("-requested_at")
        .first()
    )


def requests_finish(
    run: RunRecord,
    resource: Resource,
    request: ReconcileRequest | None,
    this_run: ReconcileRun,
    transition: Transition | None,
    now: datetime,
) -> None:
    """Finish the request with the handled token and the older open ones of the same object (guarded: only
    rows still open are changed)."""
    succeeded = run.result in _SUCCEEDED_RESULTS
    handled = Q(token=run.request_token)
    if request is not None:
        handled |= Q(requested_at__lte=request.requested_at)
    open_rows = ReconcileRequest.objects.filter(
        Q(resource=resource) | Q(key=run.key), state__in=ReconcileRequest.OPEN_STATES
    ).filter(handled)
    open_rows.filter(picked_up_at__isnull=True).update(picked_up_at=run.started_at)
    # a request keeps the trace it was made in (the HTTP request's); one made outside any trace takes the run's
    open_rows.filter(trace_id="").update(trace_id=run.trace_id)
    open_rows.update(
        resource=resource,
        state=RequestState.SUCCEEDED if succeeded else RequestState.FAILED,
        finished_at=now,
        run=this_run,
        transition=transition,
        error="" if succeeded else _error_text(run),
    )


def _error_text(run: RunRecord) -> str:
    parts = [p for p in (run.error_class, run.error_message) if p]
    return ": ".join(parts) or f"reconcile ended with {run.result}"
