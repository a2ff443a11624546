"""Suspend and resume a resource's reconciles, with who, why and until when.

A suspension is on record (the `Resource` row's `suspended` / `suspension`, a `suspended` healing record) and on
the object (the annotation `opsconsole.io/suspended: <reason>`, optionally `opsconsole.io/suspended-until:
<RFC 3339>`), so `kubectl` shows it and `kubectl annotate` can set it:

- `suspend_apply` / `resume_apply` (the console, the API, `manage.py suspend` / `resume`): the record first, the
  annotation in the same transaction (a refused patch records nothing);
- `suspension_check` (the runner, before a reconcile): an annotation someone else set or removed is recorded,
  with the user the API server authenticated for that write (`kube:<username>`, from the webhook server's
  admitted writes: `provenance.annotation_actor`) or else the annotation's field manager as a claim
  (`manager:<name>`; a removal without an admitted write is `unknown`): a field manager named like the engine's
  is a claim like any other. An expired suspension
  is lifted (actor `controller`, reason SuspensionExpired) and the annotation removed; while suspended the key
  is not reconciled (it is looked at again at expiry). Events are still archived meanwhile. A
  `suspended-until` that is no timestamp, or out of range, is refused: a `suspension.refused` record (actor
  `controller`) names the value and why, once per distinct value (not once per run), the suspension is not
  honoured (a recorded one is lifted) and the object goes on being reconciled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from reconcilers.core import actors
from reconcilers.core.meta import FIELD_MANAGER, SUSPENDED, SUSPENDED_UNTIL, last_writer, parse_rfc3339, rfc3339
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import dispatch, kube, provenance
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.engine.healing.rollback import RollbackRefused
from reconcilers.engine.healing.state import RecordedState
from reconcilers.models import HealingAction, HealingRecord, Resource

EXPIRED = "SuspensionExpired"
_OFF = ("", "false", "0", "no", "off")

log = logging.getLogger(__name__)


#: how long after a suspension's expiry its key is looked at again: the run compares the expiry with its own clock
#: (`until <= now`), so a look due exactly at `until` may come a hair early (the workqueue's delays are rounded to
#: milliseconds, and the process that computed the delay is not the one that runs the key) and find it still on,
#: which costs one more skipped run and another wait
EXPIRY_MARGIN_SECONDS = 0.05


@dataclass(frozen=True)
class SuspendCheck:
    """What the runner does: `skip` the reconcile (and look again after `delay` seconds, when it expires), or
    go on with `obj` (the object as it is now: an expired suspension's annotations removed)."""

    skip: bool
    obj: dict[str, Any]
    delay: float | None = None

    @property
    def look_again_after(self) -> float | None:
        """When a skipped key is looked at again: just after the suspension expires (`EXPIRY_MARGIN_SECONDS`);
        None for a suspension with no end (the next change of the object, or its resumption, queues it)."""
        return None if self.delay is None else self.delay + EXPIRY_MARGIN_SECONDS


def annotated(obj: dict[str, Any]) -> tuple[str, datetime | None] | None:
    """(reason, until) when the object's annotations suspend it, else None."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    reason = str(annotations.get(SUSPENDED) or "")
    if reason.strip().lower() in _OFF:
        return None
    return reason, parse_rfc3339(annotations.get(SUSPENDED_UNTIL))


def until_refused(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(value, why) when the object asks to be suspended with a `suspended-until` that cannot be honoured: not
    an RFC 3339 timestamp, or one past datetime's range once in UTC; else None."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(SUSPENDED) or "").strip().lower() in _OFF:
        return None
    value = annotations.get(SUSPENDED_UNTIL)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return str(value), "it is not a string"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value, "it is not an RFC 3339 timestamp"
    try:
        (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        return value, "it is out of range (past year 9999 or before year 1 in UTC)"
    return None


def _refuse(resource_id: int, value: str, why: str, now: datetime) -> None:
    """Record the refusal of a bad `suspended-until`, unless the newest refusal already names the same value."""
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        newest = (HealingRecord.objects.filter(resource=resource, action=HealingAction.SUSPENSION_REFUSED)
                  .order_by("-seq").values_list("detail", flat=True).first())
        if newest is not None and (newest or {}).get("value") == value:
            return
        healing_append(resource, HealingAction.SUSPENSION_REFUSED, actor="controller",
                       reason=f"{SUSPENDED_UNTIL} {value!r} refused: {why}",
                       message="the suspension is not honoured: the object goes on being reconciled", at=now,
                       detail={"annotation": SUSPENDED_UNTIL, "value": value, "why": why})
        resource.save(update_fields=fields_to_save())


def _annotate(api: Any, reconciler: Reconciler, resource: Resource, values: dict[str, str | None]) -> None:
    kube.patch_object(api, reconciler.resource, resource.namespace or None, resource.name,
                      {"metadata": {"annotations": values}}, field_manager=FIELD_MANAGER)


def _suspend_locked(resource: Resource, *, actor: str, reason: str, until: datetime | None, source: str,
                    now: datetime) -> HealingRecord:
    record = healing_append(resource, HealingAction.SUSPENDED, actor=actor, reason=reason,
                            message=f"reconciles suspended{' until ' + rfc3339(until) if until else ''}",
                            expires_at=until, at=now,
                            detail={"source": source, "established": actors.established(actor)})
    resource.suspended = True
    resource.suspension = {"actor": actor, "reason": reason, "at": now.isoformat(),
                           "until": until.isoformat() if until else None, "source": source, "record": record.seq}
    resource.save(update_fields=fields_to_save("suspended", "suspension"))
    return record


def _resume_locked(resource: Resource, *, actor: str, reason: str, now: datetime) -> HealingRecord:
    suspension = resource.suspension or {}
    record = healing_append(resource, HealingAction.RESUMED, actor=actor, reason=reason,
                            message=f"reconciles resumed (suspended by {suspension.get('actor', '?')} at "
                                    f"{suspension.get('at', '?')})", at=now, detail={"suspension": suspension})
    resource.suspended, resource.suspension = False, None
    resource.save(update_fields=fields_to_save("suspended", "suspension"))
    return record


def suspend_apply(api: Any, reconciler: Reconciler, resource_id: int, *, actor: str, reason: str,
                  until: datetime | None = None, now: datetime | None = None) -> HealingRecord:
    """Suspend one resource's reconciles (the record, then the annotation; see the module docstring)."""
    now = now or timezone.now()
    if not reason.strip():
        raise RollbackRefused("a suspension needs a reason", field="reason", status=400)
    if until is not None:  # whole seconds, as the annotation says it: the record and the object agree
        until = until.replace(microsecond=0)
    if until is not None and until <= now:
        raise RollbackRefused("until must be in the future", field="until", status=400)
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        if resource.deleted:
            raise RollbackRefused("the resource is deleted", field="resource")
        record = _suspend_locked(resource, actor=actor, reason=reason, until=until, source="opsconsole", now=now)
        _annotate(api, reconciler, resource, {SUSPENDED: reason[:1000] or "suspended",
                                               SUSPENDED_UNTIL: rfc3339(until) if until else None})
    return record


def resume_apply(api: Any, reconciler: Reconciler, resource_id: int, *, actor: str, reason: str,
                 now: datetime | None = None) -> HealingRecord:
    """Resume one resource's reconciles (the record, then the annotations removed) and enqueue it."""
    now = now or timezone.now()
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        if not resource.suspended:
            raise RollbackRefused("the resource is not suspended", field="resource")
        record = _resume_locked(resource, actor=actor, reason=reason, now=now)
        if not resource.deleted:
            try:
                _annotate(api, reconciler, resource, {SUSPENDED: None, SUSPENDED_UNTIL: None})
            except kube.ApiException as exc:
                if exc.status != 404:
                    raise
        key = resource.key
    _enqueue(key)
    return record


def _enqueue(key: str) -> None:
    """Queue `key` on the workqueue (Redis), only once the record is committed."""
    transaction.on_commit(lambda: dispatch.enqueue_many([key]))


def suspension_check(api: Any, reconciler: Reconciler, obj: dict[str, Any], state: RecordedState | None,
                     now: datetime | None = None) -> SuspendCheck:
    """Before a reconcile (see the module docstring)."""
    now = now or timezone.now()
    refused = until_refused(obj)
    if refused is not None:
        if state is not None:
            _refuse(state.id, *refused, now)
        wanted = None  # not honoured: the object is reconciled
        removed = f"the suspension was not honoured: {SUSPENDED_UNTIL} {refused[0]!r} was refused ({refused[1]})"
    else:
        wanted = annotated(obj)
        removed = f"the {SUSPENDED} annotation was removed from the object"
    if state is None or (wanted is None and not state.suspended):
        return SuspendCheck(wanted is not None and state is None and _until_open(wanted, now), obj)
    if wanted is not None:
        reason, until = wanted
        recorded = state.suspension or {}
        if not state.suspended or recorded.get("reason") != reason or recorded.get("until") != (
                until.isoformat() if until else None):
            writer = last_writer(obj, ("metadata", "annotations", SUSPENDED)) or {}
            annotation_value = str(((obj.get("metadata") or {}).get("annotations") or {}).get(SUSPENDED) or "")
            actor, _entry = provenance.annotation_actor(reconciler.resource, obj, SUSPENDED, annotation_value,
                                                        str(writer.get("manager") or ""))
            with transaction.atomic():
                resource = Resource.objects.select_for_update().get(pk=state.id)
                held = resource.suspension or {}
                if not resource.suspended or held.get("reason") != reason or held.get("until") != (
                        until.isoformat() if until else None):
                    _suspend_locked(resource, actor=actor, reason=reason, until=until, source="annotation", now=now)
        if until is not None and until <= now:
            return _expire(api, reconciler, obj, state.id, now)
        return SuspendCheck(True, obj, (until - now).total_seconds() if until else None)
    # the record says suspended, the object no longer does: someone removed the annotation
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=state.id)
        if resource.suspended:
            if refused is not None:  # lifted by the engine, for the reason on record
                actor = "controller"
            else:
                since = parse_rfc3339((resource.suspension or {}).get("at"))
                actor, _entry = provenance.annotation_actor(reconciler.resource, obj, SUSPENDED, None, "",
                                                            since=since.timestamp() if since else None)
                actor = actor if _entry is not None else actors.UNKNOWN
            _resume_locked(resource, actor=actor, now=now, reason=removed)
    return SuspendCheck(False, obj)


def _until_open(wanted: tuple[str, datetime | None], now: datetime) -> bool:
    until = wanted[1]
    return until is None or until > now


def _expire(api: Any, reconciler: Reconciler, obj: dict[str, Any], resource_id: int, now: datetime) -> SuspendCheck:
    """Lift an expired suspension: the record, then the annotations (the reconcile goes on)."""
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        if resource.suspended:
            until = (resource.suspension or {}).get("until")
            _resume_locked(resource, actor="controller", now=now, reason=f"{EXPIRED}: the suspension ended at {until}")
    meta = obj.get("metadata") or {}
    try:
        obj = kube.patch_object(api, reconciler.resource, meta.get("namespace") or None, meta["name"],
                                {"metadata": {"annotations": {SUSPENDED: None, SUSPENDED_UNTIL: None}}},
                                field_manager=FIELD_MANAGER)
    except kube.ApiException as exc:
        log.warning("could not remove the expired suspension's annotations from %s: %s", meta.get("name"), exc)
    return SuspendCheck(False, obj)
