"""Manual reconcile requests (Flux's convention), the one path the shell, the console and the API share.

`reconcile_request_create` records who asked and why (a `ReconcileRequest` row, state `requested`), sets the
annotation `opsconsole.io/reconcile-requested-at: <token>` on the object and enqueues its key at once. The
run that handles the token writes `status.lastHandledReconcileAt: <token>`, marks the request picked up and
then succeeded or failed (see the runner and `recording.reconcile_record`). The annotation is written with
the field manager `opsconsole-controller`. `kubectl annotate` (and Flux's `reconcile.fluxcd.io/requestedAt`)
works too: the run that picks such a token up makes its row, with the annotation's field manager as actor
(`recording.annotation_request_ensure`); a token that has a row already is never doubled.
"""

from __future__ import annotations

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from opentelemetry import trace

from reconcilers.core.meta import FIELD_MANAGER, RECONCILE_REQUESTED_AT, now_rfc3339
from reconcilers.core.types import Request
from reconcilers.engine import apiclient, dispatch, kube, registry
from reconcilers.engine.sampling import sampled_trace_id
from reconcilers.models import ReconcileRequest, RequestState, Resource


class ReconcileRequestError(Exception):
    """The request cannot be made (unknown kind, object not found, annotation refused)."""


class ObjectNotFound(ReconcileRequestError):
    """The object to reconcile does not exist in the cluster."""


class IdempotencyConflict(ReconcileRequestError):
    """The idempotency key was used by the same actor for another object."""


def request_token() -> str:
    """A fresh token: the request time, RFC 3339 with microseconds (as Flux's `reconcile.fluxcd.io/requestedAt`)."""
    return now_rfc3339(micro=True)


def _key_of(target: str | Resource) -> str:
    if isinstance(target, Resource):
        return target.key
    Request.from_key(target)  # ValueError when malformed
    return target


def reconcile_request_create(
    target: str | Resource,
    actor: str,
    reason: str = "",
    idempotency_key: str | None = None,
) -> ReconcileRequest:
    """Ask for a reconcile of `target` (a reconcile key `group/version/plural/namespace/name`, or a mirrored
    `Resource`) on behalf of `actor` (`user:<name>`), because `reason`.

    The same `idempotency_key` from the same actor returns the request made the first time. Raises
    ObjectNotFound when the object is not in the cluster, ReconcileRequestError for an unknown kind or when
    the annotation cannot be set (the row is then marked failed). Outside a transaction the annotation is set
    and the key enqueued before this returns; inside one, right after it commits.
    """
    if not actor.startswith("user:") or len(actor) <= len("user:"):
        raise ReconcileRequestError(f"actor must be 'user:<name>', not {actor!r}")
    try:
        key = _key_of(target)
        reconciler = registry.for_key(key)
    except (ValueError, registry.UnknownKind) as exc:
        raise ReconcileRequestError(str(exc)) from exc
    if idempotency_key:
        existing = ReconcileRequest.objects.filter(actor=actor, idempotency_key=idempotency_key).first()
        if existing is not None:
            return _same_object(existing, key)

    req = Request.from_key(key)
    api = apiclient.get_api_client(req.cluster)  # the key's cluster (its prefix; none: the default)
    obj = kube.get_object(api, reconciler.resource, req.namespace or None, req.name)
    if obj is None:
        raise ObjectNotFound(f"{reconciler.resource.kind} {req.namespaced_name} not found")
    uid = obj["metadata"]["uid"]
    try:
        with transaction.atomic():
            resource = Resource.objects.filter(uid=uid).first()
            request = ReconcileRequest.objects.create(
                resource=resource,
                cluster=resource.cluster if resource is not None else req.cluster,  # its resource's, else the key's
                key=key,
                token=request_token(),
                actor=actor,
                reason=reason,
                idempotency_key=idempotency_key or "",
                trace_id=_current_trace_id(),
            )
    except IntegrityError:
        existing = ReconcileRequest.objects.filter(actor=actor, idempotency_key=idempotency_key or "").first()
        if existing is None:
            raise
        return _same_object(existing, key)

    def annotate_and_enqueue() -> None:
        try:
            kube.patch_object(api, reconciler.resource, req.namespace or None, req.name,
                              {"metadata": {"annotations": {RECONCILE_REQUESTED_AT: request.token}}},
                              field_manager=FIELD_MANAGER)
        except Exception as exc:
            ReconcileRequest.objects.filter(pk=request.pk, state=RequestState.REQUESTED).update(
                state=RequestState.FAILED, finished_at=timezone.now(), error=f"could not set the annotation: {exc}")
            raise ReconcileRequestError(f"could not annotate {req.namespaced_name}: {exc}") from exc
        if not dispatch.enqueue_now(key):
            # coalesced: the key is being reconciled (its run's end sends it again: the run after picks the token
            # up; a key queued but not processing is sent again, since its task may have been lost), so
            # the run continues that task's trace; this request keeps its own trace id (set above) and the run
            # records both (ReconcileRun.trace_id and the request's `opsconsole.request.trace_id` attribute)
            trace.get_current_span().add_event("reconcile coalesced", {"opsconsole.key": key})

    if connection.in_atomic_block:
        transaction.on_commit(annotate_and_enqueue)
    else:
        annotate_and_enqueue()
    return request


def _current_trace_id() -> str:
    """The trace this request is made in (the HTTP request's, when traced), '' otherwise."""
    return sampled_trace_id(trace.get_current_span())


def _same_object(existing: ReconcileRequest, key: str) -> ReconcileRequest:
    if existing.key != key:
        raise IdempotencyConflict(
            f"idempotency key {existing.idempotency_key!r} was used for {existing.key}, not {key}")
    return existing


def reconcile_request_get(request_id: object) -> ReconcileRequest:
    """One request by id (ReconcileRequest.DoesNotExist when unknown)."""
    return ReconcileRequest.objects.select_related("run", "transition").get(pk=request_id)
