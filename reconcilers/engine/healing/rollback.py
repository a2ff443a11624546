"""Rolling a resource back to an earlier generation's spec: on record before acting, written, verified, escalated.

A rollback (`rollback_apply`, for the automatic path and for a person alike) goes through phases, each its own
transaction with the resource's row locked:
1. **On record.** `rollback.started` (who, why, from which generation to which, the trigger, a rollback id: a
   uuid) is committed and the rollback state is `writing` — before anything is written to the cluster.
2. **Written.** With the row locked again (a run recording the new generation waits for it), the spec recorded
   for the target generation is PUT under the field manager `opsconsole-rollback`, conditional on the version
   read in phase 1, carrying the rollback id in the annotation `opsconsole.io/rollback-id`; then
   `rollback.applied` with the generation the PUT returned, and the state `in_progress` (its deadline). That
   generation's revision is the rollback's (`provenance.revision_actor`). A PUT the API server refused (409, 4xx)
   is `rollback.failed` ("not written"; the automatic path escalates, except on a conflict, tried again later).
3. **Verified.** The runs of the restored generation go through the kind's rollback phase with the rollback as
   actor (`step`); `rollback_verify_locked` (called by the recording, in the run's transaction) concludes it: a
   ready phase → `rollback.succeeded`; the failed phase → escalation. The evaluator escalates when the deadline
   passes.

A crash between 1 and 2 (the process, the database, the API server's answer lost) leaves `writing`; the evaluator
resolves it after `WRITING_GRACE_SECONDS` (`rollback_resolve`) by reading the object with the row locked: this
rollback's id on it → the write landed (`rollback.applied`, proof: the annotation, at the generation after the
one read in phase 1 — the PUT was conditional on it); absent → `rollback.failed`, "the restored spec was never
written", escalated. A revision the runner recorded while the rollback was `writing` keeps the actor it got then
(the field manager as a claim): the proof came later, and the chain is not rewritten.

The rollback's actor is one everywhere: `rollback:auto` or `rollback:user:<name>` (`transition_actor`) on
`rollback.started`, `.applied`, `.succeeded`, `.failed` and on the transitions of its verification; the engine's
own escalations (`rollback.refused`, the `rollback_failed` anomaly) are `controller`.

Escalation (`escalate.escalate_locked`: a `rollback.failed` or `rollback.refused` record, the `rollback_failed`
anomaly, a Warning Event) hands over to a person. Never a second rollback in a row: the generation a rollback
made is never rolled back by the automatic path. When (`rollback_due`) and how often (`repeats`) the automatic
path acts is decided elsewhere; `automatic` runs it.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from reconcilers.core.kind import spec_errors
from reconcilers.core.meta import ROLLBACK_FIELD_MANAGER, ROLLBACK_ID
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import kube, metrics
from reconcilers.engine.healing import healing_of
from reconcilers.engine.healing.due import (  # noqa: F401 - re-exported: callers know them from here
    Due,
    generation_reached_ready,
    last_good_generation,
    revision_spec,
    rollback_due,
    spec_digest,
)
from reconcilers.engine.healing.escalate import (  # noqa: F401 - re-exported: callers know them from here
    Escalation,
    anomaly_clear_locked,
    anomaly_raise_locked,
    escalate_locked,
)
from reconcilers.engine.healing.records import fields_to_save, healing_append
from reconcilers.engine.healing.state import IN_PROGRESS, SUCCEEDED, WRITING, moment
from reconcilers.models import HealingAction, HealingRecord, Resource

AUTO = "auto"
#: how long a rollback may stay `writing` before the evaluator resolves it by reading the object
WRITING_GRACE_SECONDS = 5.0
#: the API answers that say for sure the PUT did not happen (anything else: the object says, later)
_NOT_WRITTEN = (400, 403, 404, 409, 422, 429)
_SAVED = fields_to_save("rollback", "active_anomalies")

log = logging.getLogger(__name__)


class RollbackRefused(Exception):
    """A rollback that cannot be done; `field` names the input at fault (for a 4xx naming it). `escalation`: the
    escalation it led to (the automatic path's write refused), for what follows the commit."""

    def __init__(self, message: str, *, field: str = "generation", status: int = 409,
                 escalation: Escalation | None = None) -> None:
        super().__init__(message)
        self.message, self.field, self.status, self.escalation = message, field, status, escalation


def transition_actor(actor: str, auto: bool) -> str:
    """The rollback's actor, on its records and its transitions: `rollback:auto` or `rollback:<actor>`."""
    return f"rollback:{AUTO}" if auto else f"rollback:{actor}"


def rollback_apply(api: Any, reconciler: Reconciler, resource_id: int, to_generation: int, *, actor: str,
                   reason: str, auto: bool = False, now: datetime | None = None,
                   trigger: dict[str, Any] | None = None, about_generation: int | None = None) -> HealingRecord:
    """Restore the spec of `to_generation` (see the module docstring); the `rollback.started` record. `actor` is
    who asked (`controller` for the automatic path, `user:<name>`); `trigger` what made the automatic path act;
    `about_generation` the generation that decision was about: when the record or the object has moved past it (a
    newer change, which the decision never judged), nothing is done (409, "changed"). Raises RollbackRefused when
    it cannot be done (nothing written to the cluster)."""
    now = now or timezone.now()
    started, obj, spec = _record_started(api, reconciler, resource_id, to_generation, actor=actor, reason=reason,
                                         auto=auto, now=now, trigger=trigger, about_generation=about_generation)
    _write(api, reconciler, resource_id, obj, spec, str(started.detail["rollback_id"]), now)
    log.info("%s: %s (by %s)", started.resource_id, started.message, started.actor)
    return started


def _record_started(api: Any, reconciler: Reconciler, resource_id: int, to_generation: int, *, actor: str,
                    reason: str, auto: bool, now: datetime, trigger: dict[str, Any] | None,
                    about_generation: int | None) -> tuple[HealingRecord, dict[str, Any], dict[str, Any]]:
    """Phase 1: the checks, then `rollback.started` and the state `writing`, committed."""
    with transaction.atomic():
        resource = Resource.objects.select_for_update().get(pk=resource_id)
        if resource.deleted:
            raise RollbackRefused("the resource is deleted", field="resource", status=409)
        _same_generation(about_generation, resource.generation, "the record")
        if auto and resource.suspended:
            raise RollbackRefused("the resource is suspended", field="resource")
        previous = dict(resource.rollback or {})
        if previous.get("state") in (IN_PROGRESS, WRITING):
            doing = "verified" if previous["state"] == IN_PROGRESS else "written"
            raise RollbackRefused(f"a rollback to generation {previous.get('to_generation')} is being {doing}",
                                  field="resource")
        if to_generation >= resource.generation or to_generation < 1:
            raise RollbackRefused(f"generation must be an earlier generation than the current "
                                  f"{resource.generation} (got {to_generation})", status=400)
        spec = revision_spec(resource, to_generation)
        if spec is None:
            raise RollbackRefused(f"no spec is on record for generation {to_generation}", status=400)
        if (invalid := spec_invalid(reconciler, spec)) is not None:
            raise RollbackRefused(f"the spec of generation {to_generation} no longer validates against the kind's "
                                  f"current model: {invalid}", status=422)
        obj = kube.get_object(api, reconciler.resource, resource.namespace or None, resource.name)
        if obj is None or obj["metadata"].get("uid") != resource.uid:
            raise RollbackRefused("the object is gone from the cluster", field="resource")
        current = int(obj["metadata"].get("generation") or 0)
        _same_generation(about_generation, current, "the object")
        if (obj.get("spec") or {}) == spec:
            raise RollbackRefused(f"the current spec is already generation {to_generation}'s", status=400)
        rollback_id, who = uuid.uuid4().hex, transition_actor(actor, auto)
        # who asked: the person (`user:<name>`), or for the automatic path the rollback's own actor (`rollback:auto`,
        # not the `controller` that called it): one name for the engine's rollback on every record and transition
        by = who if auto else actor
        version = str(obj["metadata"].get("resourceVersion") or "")
        from_digest = spec_digest(obj.get("spec") or {})
        detail = {"rollback_id": rollback_id, "from_generation": current, "to_generation": to_generation,
                  "auto": auto, "by": by, "field_manager": ROLLBACK_FIELD_MANAGER, "annotation": ROLLBACK_ID,
                  "resource_version": version, "from_digest": from_digest}
        if trigger:
            detail["trigger"] = trigger
        record = healing_append(resource, HealingAction.ROLLBACK_STARTED, actor=who, reason=reason,
                                message=f"rolling back from generation {current} to the spec of generation "
                                        f"{to_generation} (rollback {rollback_id}): on record before the write",
                                target_generation=to_generation, at=now, detail=detail)
        previous.pop("previous", None)
        resource.rollback = {
            "state": WRITING, "id": rollback_id, "actor": who, "by": by, "auto": auto,
            "from_generation": current, "to_generation": to_generation, "from_digest": from_digest,
            "resource_version": version, "started_at": now.isoformat(), "reason": reason, "record": record.seq,
            "trigger": trigger or None, "previous": previous or None,
        }
        resource.save(update_fields=fields_to_save("rollback"))
        kind = resource.kind
        transaction.on_commit(lambda: metrics.ROLLBACKS.labels(kind, "started").inc())
    return record, obj, spec


def _same_generation(about: int | None, now_at: int, where: str) -> None:
    """Refuse (409, "changed": the automatic path looks again at its next step) when `where` is no longer at the
    generation the decision to roll back was about."""
    if about is not None and now_at != about:
        raise RollbackRefused(f"the object changed meanwhile: {where} is at generation {now_at}, the rollback was "
                              f"decided about generation {about}", field="resource")


def spec_invalid(reconciler: Reconciler, spec: dict[str, Any]) -> str | None:
    """Why a recorded spec fails the kind's current `spec_model` (each bad field named), or None: the kind may
    have changed since the generation was recorded, and the engine never writes a spec its own model refuses."""
    model = reconciler.spec_model
    if model is None:
        return None
    try:
        model.model_validate_json(json.dumps(spec))
    except ValidationError as exc:
        return "; ".join(spec_errors(exc))
    return None


def _write(api: Any, reconciler: Reconciler, resource_id: int, obj: dict[str, Any], spec: dict[str, Any],
           rollback_id: str, now: datetime) -> None:
    """Phase 2: the PUT and `rollback.applied` with the row locked (or `rollback.failed` when it was refused).
    Any other failure leaves the state `writing` for `rollback_resolve`."""
    refusal: RollbackRefused | None = None
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=resource_id)
        rollback = row.rollback or {}
        if rollback.get("state") != WRITING or rollback.get("id") != rollback_id:
            raise RollbackRefused(f"the rollback was concluded before its write: {rollback.get('outcome') or '?'}",
                                  field="resource")
        meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        meta["annotations"] = {**(meta.get("annotations") or {}), ROLLBACK_ID: rollback_id}
        path = kube.object_path(reconciler.resource, row.namespace or None, row.name)
        try:
            written = kube.request_json(api, "PUT", path, query={"fieldManager": ROLLBACK_FIELD_MANAGER},
                                        body={**obj, "metadata": meta, "spec": spec})
        except kube.ApiException as exc:
            if exc.status not in _NOT_WRITTEN:
                raise  # the write may have landed: the object will say (`rollback_resolve`)
            refusal = _not_written_locked(row, exc, now)
        else:
            written_meta = written.get("metadata") or {}
            applied_locked(row, reconciler, int(written_meta.get("generation") or 0), now,
                           proof="the generation the PUT returned",
                           resource_version=str(written_meta.get("resourceVersion") or ""))
        row.save(update_fields=_SAVED)
    if refusal is not None:
        raise refusal


def applied_locked(row: Resource, reconciler: Reconciler, generation: int, now: datetime, *, proof: str,
                   resource_version: str = "", extra: dict[str, Any] | None = None) -> HealingRecord:
    """`rollback.applied` for the `writing` rollback of `row` (locked; the caller saves it): the restored spec is
    generation `generation`, verified from now until the deadline."""
    rollback = {k: v for k, v in (row.rollback or {}).items() if k != "previous"}
    deadline = now + timedelta(seconds=healing_of(reconciler).verify_seconds)
    to_generation = rollback.get("to_generation")
    record = healing_append(row, HealingAction.ROLLBACK_APPLIED, actor=str(rollback.get("actor") or "controller"),
                            reason=str(rollback.get("reason") or ""),
                            message=f"the spec of generation {to_generation} was written: generation {generation}",
                            target_generation=to_generation, at=now,
                            detail={"rollback_id": rollback.get("id"), "generation": generation,
                                    "from_generation": rollback.get("from_generation"),
                                    "from_digest": rollback.get("from_digest"), "resource_version": resource_version,
                                    "proof": proof, "deadline": deadline.isoformat(), **(extra or {})})
    row.rollback = {**rollback, "state": IN_PROGRESS, "generation": generation, "applied_at": now.isoformat(),
                    "deadline": deadline.isoformat(), "applied": record.seq}
    return record


def _not_written_locked(row: Resource, exc: kube.ApiException, now: datetime) -> RollbackRefused:
    """The API server refused the PUT: `rollback.failed` ("not written"). The automatic path escalates, except on
    a conflict (tried again at its next step); a person's rollback leaves the state as it was before it."""
    rollback = dict(row.rollback or {})
    why = f"the restored spec was not written: the API server answered {exc.status} {exc.reason}".strip()
    escalation = None
    if rollback.get("auto") and exc.status != 409:
        escalation = escalate_locked(row, HealingAction.ROLLBACK_FAILED, why, now)
    else:
        healing_append(row, HealingAction.ROLLBACK_FAILED, actor=str(rollback.get("actor") or "controller"),
                       reason=why, message=f"rollback {rollback.get('id')}: {why}",
                       target_generation=rollback.get("to_generation"), at=now,
                       detail={"rollback_id": rollback.get("id"), "written": False, "status": exc.status,
                               "escalated": False})
        row.rollback = rollback.get("previous") or None
        kind = row.kind
        transaction.on_commit(lambda: metrics.ROLLBACKS.labels(kind, "failed").inc())
    if exc.status == 409:
        return RollbackRefused("the object changed meanwhile; try again", field="resource")
    if exc.status in (400, 422):
        return RollbackRefused(f"the API server refused the restored spec: {exc.reason}", status=400,
                               escalation=escalation)
    return RollbackRefused(f"the API server refused the write: {exc.status} {exc.reason}", field="resource",
                           escalation=escalation)


def rollback_resolve(api: Any, reconciler: Reconciler, resource_id: int, now: datetime) -> Escalation | None:
    """A rollback left `writing` (see the module docstring): read the object with the row locked and record
    what became of the write. The escalation when it was never written; None otherwise (or when the row moved on).
    An API error propagates: the next step tries again."""
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=resource_id)
        rollback = row.rollback or {}
        if rollback.get("state") != WRITING:
            return None
        obj = kube.get_object(api, reconciler.resource, row.namespace or None, row.name)
        escalation = None
        if obj is None or (obj.get("metadata") or {}).get("uid") != row.uid:
            escalation = escalate_locked(row, HealingAction.ROLLBACK_FAILED, "the object is gone from the cluster: "
                                         "the restored spec's write cannot be confirmed", now)
        else:
            meta = obj.get("metadata") or {}
            live = int(meta.get("generation") or 0)
            expected = int(rollback.get("from_generation") or 0) + 1
            carries_id = (meta.get("annotations") or {}).get(ROLLBACK_ID) == rollback.get("id")
            if carries_id and live >= expected:
                applied_locked(row, reconciler, expected, now, proof=f"the annotation {ROLLBACK_ID} on the object",
                               resource_version=str(meta.get("resourceVersion") or ""),
                               extra={"recovered": True, "live_generation": live})
            elif carries_id:  # the spec write moves the generation: an id on an unmoved object is someone's copy
                escalation = escalate_locked(row, HealingAction.ROLLBACK_FAILED, f"the restored spec was never "
                                             f"written: generation {live} carries rollback id {rollback.get('id')}, "
                                             f"but no write of this rollback made generation {live}", now)
            elif live == int(rollback.get("from_generation") or 0):
                escalation = escalate_locked(row, HealingAction.ROLLBACK_FAILED, f"the restored spec was never "
                                             f"written (generation {live} carries no rollback id "
                                             f"{rollback.get('id')})", now)
            else:
                escalation = escalate_locked(row, HealingAction.ROLLBACK_FAILED, f"the restored spec's write cannot "
                                             f"be confirmed: generation {live} carries no rollback id "
                                             f"{rollback.get('id')}", now)
        row.save(update_fields=_SAVED)
    return escalation


def rollback_verify_locked(resource: Resource, reconciler: Reconciler, now: datetime) -> Escalation | None:
    """After a run's transitions (the row locked, in its transaction; the caller saves the row): conclude the
    rollback being verified when the restored generation reached a ready phase (succeeded) or the failed one
    (escalation, returned for what follows the commit)."""
    rollback = resource.rollback or {}
    if rollback.get("state") != IN_PROGRESS or resource.generation != rollback.get("generation"):
        return None
    if resource.phase in reconciler.ready_phases:
        healing_append(resource, HealingAction.ROLLBACK_SUCCEEDED, actor=str(rollback.get("actor") or "controller"),
                       reason="the restored generation reached a ready phase",
                       message=f"generation {resource.generation} (the spec of generation "
                               f"{rollback.get('to_generation')}) is {resource.phase}",
                       target_generation=rollback.get("to_generation"), at=now,
                       detail={"phase": resource.phase, "seconds": _since(rollback, now)})
        resource.rollback = {**rollback, "state": SUCCEEDED, "finished_at": now.isoformat()}
        kind = resource.kind
        transaction.on_commit(lambda: metrics.ROLLBACKS.labels(kind, "succeeded").inc())
        return None
    if resource.phase == reconciler.failed_phase:
        return escalate_locked(resource, HealingAction.ROLLBACK_FAILED, f"the restored generation is "
                               f"{resource.phase}: {resource.reason}: {resource.message}"[:2000], now)
    return None


def _since(rollback: dict[str, Any], now: datetime) -> float | None:
    started = moment(rollback.get("started_at"))
    return round((now - started).total_seconds(), 3) if started is not None else None
