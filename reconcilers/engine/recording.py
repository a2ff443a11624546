"""Recording a reconcile in the database: the run, any phase transition (chained), the mirror, the requests.

Everything a reconcile leaves behind is written by `reconcile_record` in one transaction, with the object's
`Resource` row locked (`select_for_update`), so concurrent runs for one object serialise here. The phase a
transition starts from is the one the *database* recorded, not the live status: a worker killed after its
status write but before this commit gets its transition recorded by the next run, and a rerun after the
commit finds nothing to record (deduplication). The per-resource `(resource_uid, seq)` unique constraint is
the last guard: a conflict means another run recorded it, and the recording is redone from a fresh read. On
PostgreSQL a run that needs nothing else is written in one statement instead, guarded by a compare-and-swap on
the chain head the run read before its reconcile (`recording_sql`); the locked transaction is its fallback.

Telemetry: the recording is a child span (`record reconcile`) of the reconcile's; once committed, every
transition counts in `opsconsole_transitions_total{kind,from,to}` and the time spent in the phase it left in
`opsconsole_time_in_phase_seconds{kind,phase}`.

This module is the locked record and the recording's one import path; each concern has its own module, and the
names callers use are re-exported here:

- `recording_rows`: the dataclasses (`RunRecord`, `ObservedObject`, `RecordOutcome`) and the row builders both
  paths share (`run_row`, `transition_row`, `revision_row`, `transition_append`, `mirror_observed`), appending
  chain links through `chain_link`;
- `recording_sql`: the one-statement record; `recording_reads`: the chain head it swaps against;
- `recording_anomalies`: a refused change's and an out-of-band phase's anomalies;
- `recording_requests`: the manual requests a run takes up (`request_taken_up`: made, picked up, their traces) and
  finishes;
- `recording_mirror`: the controller's mirror batch (`resource_mirror_write`, `resource_mirror_upsert`,
  `resource_mirror_mark_deleted`);
- `recording_deletions`: deletions without a finalizer (`resource_deletions_record`, `resource_mirror_sweep`,
  `resource_mirror_gone`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from reconcilers.core.reconciler import Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.engine import sampling
from reconcilers.engine.annotation_requests import annotation_request_ensure
from reconcilers.engine.chain_link import head_moved, link_append
from reconcilers.engine.healing.rollback import rollback_verify_locked
from reconcilers.engine.recording_anomalies import anomaly_record, out_of_band_record
from reconcilers.engine.recording_deletions import (
    OBJECT_DELETED,
    Deletion,
    resource_deletions_record,
    resource_mirror_gone,
    resource_mirror_sweep,
)
from reconcilers.engine.recording_mirror import (
    resource_mirror_mark_deleted,
    resource_mirror_upsert,
    resource_mirror_write,
    resources_locked,
)
from reconcilers.engine.recording_reads import ChainHead
from reconcilers.engine.recording_requests import (
    request_handled,
    request_taken_up,
    request_trace_ids,
    requests_finish,
    requests_picked_up,
)
from reconcilers.engine.recording_rows import (
    MIRROR_FIELDS,
    Move,
    ObservedObject,
    RecordOutcome,
    RunRecord,
    actor_refused,
    actor_valid,
    mirror_observed,
    new_resource,
    revision_row,
    run_row,
    transition_append,
    transition_row,
    transitions_observe,
    transitions_planned,
)
from reconcilers.engine.recording_sql import reconcile_record_one_statement
from reconcilers.engine.step import OutOfBand, PhaseChange, plan_transitions
from reconcilers.models import Resource, RunResult, SpecRevision, Transition

#: the names callers and tests know from this module (their homes are the modules above)
__all__ = [
    "MIRROR_FIELDS", "OBJECT_DELETED", "ChainHead", "Deletion", "ObservedObject", "PhaseChange", "RecordOutcome",
    "RunRecord", "annotation_request_ensure", "head_moved", "mirror_observed", "new_resource", "out_of_band_record",
    "reconcile_record", "request_taken_up", "request_trace_ids", "requests_picked_up", "resource_deletions_record",
    "resource_mirror_gone", "resource_mirror_mark_deleted", "resource_mirror_sweep", "resource_mirror_upsert",
    "resource_mirror_write", "revision_record", "revision_row", "run_record_unobserved", "run_row",
    "transition_append", "transition_row", "transitions_planned",
]

_ATTEMPTS = 5


def reconcile_record(
    run: RunRecord, obj: ObservedObject, change: PhaseChange | None, machine: StateMachine, *,
    live: dict[str, Any] | None = None, out_of_band: OutOfBand | None = None, reconciler: Reconciler | None = None,
    head: ChainHead | None = None,
) -> RecordOutcome:
    """Record one reconcile in one transaction (see the module docstring).

    With `change` given and its phase different from the recorded one: an allowed change appends a chained
    Transition and moves the recorded phase; a refused one is recorded as an Anomaly. From no phase at all,
    the object first enters the machine's initial phase (one Transition), then moves on if that is allowed.
    Always: the ReconcileRun row, the mirror, and the manual requests the run handled. With the `live` object
    (as the API returned it, managedFields included): the spec revision of a generation not on record yet
    (`revision_record`); with `out_of_band`: the anomaly of a phase another field manager wrote
    (`out_of_band_record`); with the `reconciler`: the verification of a rollback being verified
    (`healing.rollback.rollback_verify_locked`). With the `head` the runner read before the reconcile, a run
    that needs nothing else is written in one statement when that head is still current
    (`recording_sql.reconcile_record_one_statement`); otherwise, and always on SQLite, as above.
    """
    if run.result not in RunResult.values:
        raise ValueError(f"result must be one of {RunResult.values}, not {run.result!r}")
    if change is not None and not actor_valid(change.actor):
        raise actor_refused(change.actor)
    tracer = sampling.tracer("opsconsole.recording")  # one per provider (tests change it)
    with tracer.start_as_current_span("record reconcile", attributes={"db.operation.name": "reconcile_record",
                                                                        "opsconsole.kind": run.kind}) as span:
        if head is not None:
            moves: list[Move] = []
            fast = reconcile_record_one_statement(run, obj, change, machine, head, live=live,
                                                  out_of_band=out_of_band, moves=moves)
            if fast is not None:
                if span.is_recording():
                    span.set_attributes({"opsconsole.transitions": len(fast.transition_ids),
                                         "opsconsole.record.one_statement": True})
                transitions_observe(run.kind, moves)
                return fast
        for attempt in range(1, _ATTEMPTS + 1):
            moves = []
            try:
                with transaction.atomic():
                    outcome = _record(run, obj, change, machine, moves, live, out_of_band, reconciler)
            except IntegrityError:
                # a concurrent run created the Resource row or recorded this transition first: redo from a
                # fresh read, which then finds the object's phase already moved (nothing is doubled)
                if attempt == _ATTEMPTS:
                    raise
                continue
            if span.is_recording():
                span.set_attribute("opsconsole.transitions", len(outcome.transition_ids))
            transitions_observe(run.kind, moves)  # committed: count them
            return outcome
    raise AssertionError("unreachable")


def run_record_unobserved(run: RunRecord) -> int:
    """Record a run that never saw its object (the GET failed): the ReconcileRun row alone, linked to the
    object's mirror when there is one. Returns the run's id."""
    resource = Resource.objects.filter(key=run.key, deleted=False).order_by("-created_at").first()
    row = run_row(run, resource)
    row.save(force_insert=True)
    return row.id


def revision_record(resource: Resource, live: dict[str, Any], at: datetime) -> SpecRevision | None:
    """Append the `SpecRevision` of the live object's generation to the chain of `resource` (locked by the
    caller, inside its transaction) when it is newer than the last revision on record: the spec, its diff from
    that revision, and who changed it (`provenance.revision_actor`: the rollback whose own write returned that
    generation, else the user of the admitted write of that spec, else the newest managedFields entry owning a
    changed field, as a claim). None when the generation is on record already."""
    meta = live.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    if generation <= 0 or not meta.get("uid") or meta["uid"] != resource.uid:
        return None
    revisions = SpecRevision.objects.filter(resource_uid=resource.uid).order_by("-seq")
    # every run asks; only a new generation reads the previous spec (it may be large) for the diff
    last_generation = revisions.values_list("generation", flat=True).first()
    if last_generation is not None and generation <= last_generation:
        return None
    previous = revisions.values_list("spec", flat=True).first() if last_generation is not None else None
    return link_append(resource, revision_row(resource, live, at, previous or {}))


def _record(
    run: RunRecord,
    obj: ObservedObject,
    change: PhaseChange | None,
    machine: StateMachine,
    moves: list[Move],
    live: dict[str, Any] | None = None,
    out_of_band: OutOfBand | None = None,
    reconciler: Reconciler | None = None,
) -> RecordOutcome:
    now = timezone.now()
    resource = resources_locked({obj.uid: obj})[obj.uid]
    from_phase = resource.phase
    mirror_observed(resource, obj, now)
    # before any transition of this run: the chain shows the spec change, then what it led to
    revision = revision_record(resource, live, now) if live is not None else None
    foreign_id = out_of_band_record(resource, out_of_band, obj.generation, now) if out_of_band else None

    request = request_handled(run, resource) if run.request_token else None
    this_run = run_row(run, resource, request=request)
    this_run.save(force_insert=True)

    transitions: list[Transition] = []
    anomaly_id: int | None = None
    if change is not None:
        planned, refused = plan_transitions(machine, from_phase, change)
        transitions = transitions_planned(resource, planned, change, this_run, obj, now, moves)
        for row in transitions:
            row.save(force_insert=True)
        if refused:
            anomaly_id = anomaly_record(resource, change, machine, this_run)
        else:
            resource.reason, resource.message = change.reason[:255], change.message

    concluded, escalation = "", None
    if reconciler is not None and resource.rollback:
        state = resource.rollback.get("state")
        escalation = rollback_verify_locked(resource, reconciler, now)
        if resource.rollback.get("state") != state:
            concluded = str(resource.rollback.get("state") or "")

    resource.last_reconcile_at = now
    resource.last_result = run.result
    resource.save()

    if run.request_token:
        requests_finish(run, resource, request, this_run, transitions[0] if transitions else None, now)
    return RecordOutcome(this_run.id, [t.id for t in transitions], anomaly_id, from_phase, resource.phase,
                         transitions, revision.id if revision else None, foreign_id, concluded, escalation)
