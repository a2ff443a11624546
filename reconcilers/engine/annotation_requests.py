"""Manual-reconcile annotations nobody asked for through opsconsole (`kubectl annotate`, `flux reconcile`): each
becomes a `ReconcileRequest` like the console's, with who set it as far as it can be established.

A token that has a request row already is opsconsole's own (the console and the API make the row before they
annotate the object with its token) and is left alone. Any other token is someone else's, whatever field manager
wrote it: `opsconsole-controller` on an annotation proves nothing (anyone may send that name). Its actor is the
user the API server authenticated for the write that set that value (`provenance.annotation_actor`: an admitted
write, `kube:<username>`), else the annotation's field manager as a claim (`manager:<name>`); the `ActionRecord`
says which (`auth` `kube-admission` or `manager-claim`, `detail.established`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reconcilers.core import actors
from reconcilers.core.meta import FLUX_REQUESTED_AT, RECONCILE_REQUESTED_AT, last_writer, parse_rfc3339
from reconcilers.engine import provenance
from reconcilers.engine.recording_rows import cluster_of_key
from reconcilers.models import ActionRecord, Outcome, ReconcileRequest, Resource


def request_annotations() -> tuple[str, ...]:
    """The annotations that ask for a manual reconcile: opsconsole's, and Flux's `reconcile.fluxcd.io/requestedAt`
    unless `OPSCONSOLE_FLUX_REQUESTED_AT` is off."""
    if getattr(settings, "OPSCONSOLE_FLUX_REQUESTED_AT", True):
        return (RECONCILE_REQUESTED_AT, FLUX_REQUESTED_AT)
    return (RECONCILE_REQUESTED_AT,)


def annotation_request_ensure(key: str, obj: dict[str, Any], annotation: str, token: str) -> ReconcileRequest | None:
    """The `ReconcileRequest` (and `ActionRecord`) of a manual-reconcile annotation that has no row yet (see the
    module docstring), requested at its managedFields entry's time (else now). Returns the row made, or None."""
    if ReconcileRequest.objects.filter(key=key, token=token).exists():
        return None
    writer = last_writer(obj, ("metadata", "annotations", annotation)) or {}
    manager = str(writer.get("manager") or "")
    actor, entry = provenance.annotation_actor(provenance.kind_of(obj), obj, annotation, token, manager)
    established = actors.established(actor)
    meta = obj.get("metadata") or {}
    requested_at = parse_rfc3339(writer.get("time")) or timezone.now()
    claimed = f"field manager {manager or '(unknown: no managedFields)'}"
    by = f"{actor} (authenticated by the API server; {claimed})" if entry is not None else f"{claimed} (a claim)"
    reason = f"annotation {annotation}={token} set by {by}"
    with transaction.atomic():
        resource = Resource.objects.filter(uid=meta.get("uid") or "").first()
        cluster = resource.cluster if resource is not None else cluster_of_key(key)  # the resource's, else the key's
        request = ReconcileRequest.objects.create(
            resource=resource, cluster=cluster, key=key, token=token[:128],
            actor=actor[:150], reason=reason, requested_at=requested_at,
        )
        detail: dict[str, Any] = {
            "annotation": annotation, "token": token, "request": str(request.pk), "established": established,
            "managedFields": {k: writer.get(k) for k in ("manager", "operation", "time", "subresource")
                              if writer.get(k)}}
        if entry is not None:
            detail["admitted"] = {"user": entry.get("user"), "at": entry.get("at"), "peer": entry.get("peer")}
        ActionRecord.objects.create(
            actor=actor[:255], auth=provenance.AUTH_ADMISSION if entry is not None else provenance.AUTH_CLAIM,
            action="resource.reconcile", cluster=cluster, method="PATCH",
            path=f"metadata.annotations[{annotation}]"[:1024],
            target=key[:1024], reason=reason, outcome=Outcome.ALLOWED, status_code=200, detail=detail,
        )
    return request
