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

The runner reads through this module too: the manual requests a run picks up (`requests_picked_up`,
`request_trace_ids`), an object found gone (`resource_mirror_gone`) and a run that never saw its object
(`run_record_unobserved`); the phase on record comes with the healing state (`healing.state.resource_state`).

The controller keeps the rest of the mirror current with `resource_mirror_upsert` (never the phase) and
`resource_mirror_mark_deleted`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from reconcilers.core import actors
from reconcilers.core.meta import AUTO_ROLLBACK, controller_ref, parse_rfc3339, spec_diff, spec_writers
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.engine import metrics, provenance, sampling
from reconcilers.engine.annotation_requests import annotation_request_ensure  # noqa: F401 - the runner's name for it
from reconcilers.engine.audit import revision_fields, revision_hash, row_fields, transition_hash
from reconcilers.engine.step import OutOfBand, PhaseChange, plan_transitions
from reconcilers.models import (
    Anomaly,
    AnomalyCategory,
    ReconcileRequest,
    ReconcileRun,
    RequestState,
    Resource,
    RunResult,
    SpecRevision,
    Transition,
)

#: results after which a handled manual request counts as succeeded (an error fails it)
_SUCCEEDED_RESULTS = {RunResult.SUCCESS, RunResult.REQUEUE, RunResult.REQUEUE_AFTER}
_ATTEMPTS = 5

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from reconcilers.engine.recording_sql import ChainHead


@dataclass
class ObservedObject:
    """What a run saw of the live object after its status write."""

    kind: ResourceKind
    uid: str
    namespace: str
    name: str
    generation: int
    observed_generation: int | None
    resource_version: str
    labels: dict
    owner: dict | None
    spec: dict
    status: dict
    conditions: list[dict]
    deleted: bool = False
    auto_rollback: bool | None = None  # the object's opsconsole.io/auto-rollback annotation, when it sets one

    @classmethod
    def from_api(cls, kind: ResourceKind, obj: dict[str, Any]) -> ObservedObject:
        """What the mirror keeps of an object as the API returned it."""
        meta = obj.get("metadata") or {}
        if not meta.get("uid"):
            raise ValueError("the object has no metadata.uid")
        status = obj.get("status") or {}
        og = status.get("observedGeneration")
        return cls(
            kind=kind, uid=meta["uid"], namespace=meta.get("namespace") or "", name=meta["name"],
            generation=int(meta.get("generation") or 0), observed_generation=int(og) if og is not None else None,
            resource_version=str(meta.get("resourceVersion") or ""), labels=dict(meta.get("labels") or {}),
            owner=_owner(meta), spec=obj.get("spec") or {}, status=status,
            conditions=list(status.get("conditions") or []),
            auto_rollback=_flag((meta.get("annotations") or {}).get(AUTO_ROLLBACK)),
        )


@dataclass
class RunRecord:
    """One reconcile run as the runner measured it."""

    key: str
    kind: str
    started_at: datetime
    duration_seconds: float
    result: str
    error_class: str = ""
    error_message: str = ""
    attempt: int = 1
    worker: str = ""
    trace_id: str = ""
    request_token: str | None = None  # the manual-reconcile token this run handled


@dataclass
class RecordOutcome:
    """What was written: the run, the transitions appended (in order), the anomaly (new or the existing one
    for the same refused change), and the recorded phase before and after."""

    run_id: int
    transition_ids: list[int]
    anomaly_id: int | None
    from_phase: str
    to_phase: str
    transitions: list[Transition] = field(default_factory=list)  # the rows of transition_ids, in order
    revision_id: int | None = None  # the spec revision recorded for a generation not on record yet
    out_of_band_id: int | None = None  # the anomaly of a live phase another field manager wrote
    rollback_concluded: str = ""  # "succeeded" or "failed": this run concluded a rollback's verification
    escalation: Any = None  # the rollback's escalation (healing.rollback.Escalation) when it failed


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
    if change is not None and not _actor_valid(change.actor):
        raise ValueError(f"actor must be 'controller', 'user:<name>', 'rollback:<who>', 'kube:<user>' or "
                         f"'unknown', not {change.actor!r}")
    tracer = sampling.tracer("opsconsole.recording")  # one per provider (tests change it)
    with tracer.start_as_current_span("record reconcile", attributes={"db.operation.name": "reconcile_record",
                                                                        "opsconsole.kind": run.kind}) as span:
        if head is not None:
            from reconcilers.engine.recording_sql import reconcile_record_one_statement  # it builds on this module

            moves: list[tuple[str, str, float | None]] = []
            fast = reconcile_record_one_statement(run, obj, change, machine, head, live=live,
                                                  out_of_band=out_of_band, moves=moves)
            if fast is not None:
                if span.is_recording():
                    span.set_attributes({"opsconsole.transitions": len(fast.transition_ids),
                                         "opsconsole.record.one_statement": True})
                _transitions_observe(run.kind, moves)
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
            _transitions_observe(run.kind, moves)  # committed: count them
            return outcome
    raise AssertionError("unreachable")


def run_record_unobserved(run: RunRecord) -> int:
    """Record a run that never saw its object (the GET failed): the ReconcileRun row alone, linked to the
    object's mirror when there is one. Returns the run's id."""
    resource = Resource.objects.filter(key=run.key, deleted=False).order_by("-created_at").first()
    row = run_row(run, resource)
    row.save(force_insert=True)
    return row.id


def run_row(run: RunRecord, resource: Resource | None, *, request: ReconcileRequest | None = None,
            run_id: int | None = None) -> ReconcileRun:
    """The `ReconcileRun` row of `run` (not saved), filed under `resource`, with the manual `request` it handled
    and, when given, the id reserved for it."""
    return ReconcileRun(
        id=run_id, key=run.key, kind=run.kind, resource=resource, started_at=run.started_at,
        duration_seconds=run.duration_seconds, result=run.result, error_class=run.error_class[:255],
        error_message=run.error_message, attempt=run.attempt, worker=run.worker[:255], trace_id=run.trace_id,
        request=request,
    )


def transitions_planned(resource: Resource, planned: Sequence[Any], change: PhaseChange, run: ReconcileRun,
                        obj: ObservedObject, at: datetime, moves: list[tuple[str, str, float | None]],
                        ) -> list[Transition]:
    """The chained Transition rows of the `planned` moves (`step.plan_transitions`) of `change`, built in order
    onto `resource`'s head (moved in memory, not saved), each with the run, its trace and the observed generation
    and resourceVersion; `moves` gets (from, to, seconds in the phase left) for each, for the metrics."""
    rows = []
    for move in planned:
        since = resource.phase_since
        moves.append((resource.phase, move.to_phase, (at - since).total_seconds() if since else None))
        row = transition_row(resource, to_phase=move.to_phase, reason=move.reason, message=move.message,
                             actor=change.actor, run=run, trace_id=run.trace_id, at=at, generation=obj.generation,
                             resource_version=obj.resource_version)
        head_moved(resource, row)
        rows.append(row)
    return rows


# -- spec revisions, out-of-band status changes, annotation requests ------------------------------------------


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
    row = revision_row(resource, live, at, previous or {})
    row.save(force_insert=True)
    head_moved(resource, row)
    return row


def revision_row(resource: Resource, live: dict[str, Any], at: datetime, previous: dict[str, Any]) -> SpecRevision:
    """The next chained `SpecRevision` of `resource` for the live object's generation (not saved): its spec, the
    diff from `previous` (the last revision's spec, {} for the first) and who changed it."""
    meta = live.get("metadata") or {}
    spec = live.get("spec") or {}
    diff = spec_diff(previous, spec)
    writers = spec_writers(live, diff) or []
    top = writers[0] if writers else {}
    actor, _admitted = provenance.revision_actor(provenance.kind_of(live), live, str(top.get("manager") or ""),
                                                 resource.rollback)
    prev_hash = resource.last_transition_hash
    row = SpecRevision(
        resource=resource, resource_uid=resource.uid, kind=resource.kind, namespace=resource.namespace,
        name=resource.name, seq=resource.last_revision_seq + 1, chain_after=resource.last_transition_seq,
        generation=int(meta.get("generation") or 0), resource_version=str(meta.get("resourceVersion") or ""),
        spec=spec, diff=diff, actor=actor[:255],
        operation=str(top.get("operation") or "")[:32], managers=writers,
        changed_at=parse_rfc3339(top.get("time")), created_at=at, prev_hash=prev_hash,
    )
    row.hash = revision_hash(revision_fields(row), prev_hash)
    return row


def head_moved(resource: Resource, row: Transition | SpecRevision) -> None:
    """Move `resource`'s chain head (in memory, saved by the caller) onto `row`, a link just appended: a
    transition moves the phase and the transition count, a revision the revision count."""
    if isinstance(row, SpecRevision):
        resource.last_revision_seq = row.seq
    else:
        resource.phase, resource.phase_since = row.to_phase, row.created_at
        resource.last_transition_seq = row.seq
    resource.last_transition_hash = row.hash


def out_of_band_record(resource: Resource, foreign: OutOfBand, generation: int, at: datetime) -> int:
    """The Anomaly of a live phase the engine did not write (the record's phase is left alone, and no
    transition is recorded): actor `kube:<user>` (admission) or `manager:<name>` (a claim), what was written
    and its managedFields entry in `observed`. One row per write (the entry's time): a later run seeing the
    same write adds nothing. Not linked to the run that saw it: a manual request that run handled has nothing to
    do with it."""
    observed = {"phase": foreign.phase, "reason": foreign.reason, "message": foreign.message,
                "manager": foreign.manager, "operation": foreign.operation, "time": foreign.time,
                "subresource": foreign.subresource, "established": actors.established(foreign.actor)}
    existing = (Anomaly.objects.filter(resource=resource, category=AnomalyCategory.OUT_OF_BAND,
                                       to_phase=foreign.phase, actor=foreign.actor[:255],
                                       observed__time=foreign.time)
                .values_list("id", flat=True).first())
    if existing is not None:
        return existing
    via = f"{foreign.operation or 'a write'}{' of /' + foreign.subresource if foreign.subresource else ''}"
    who = (f"{foreign.established_by} (authenticated by the API server; field manager {foreign.manager!r})"
           if foreign.established_by else f"field manager {foreign.manager!r} (a claim, not verified)")
    detail = (f"status.phase {foreign.phase!r} was written by {who} ({via}"
              f"{', at ' + foreign.time if foreign.time else ''}), not by the engine: not recorded as a transition "
              f"and not built on; the reconcile went on from the phase on record ({resource.phase or '(none)'})")
    return Anomaly.objects.create(
        resource=resource, from_phase=resource.phase, to_phase=foreign.phase[:63], reason=foreign.reason[:255],
        message=foreign.message, detail=detail, generation=generation, actor=foreign.actor[:255], run=None,
        category=AnomalyCategory.OUT_OF_BAND, observed=observed, created_at=at,
    ).id


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


def resource_mirror_gone(key: str) -> None:
    """The object of `key` is gone from the API: every live mirror row of that key is recorded deleted
    (`resource_deletions_record`; a row of a kind no longer registered is only marked deleted)."""
    uids = list(Resource.objects.filter(key=key, deleted=False).values_list("uid", flat=True))
    from reconcilers.engine import registry  # here: the registry reads settings when first used

    try:
        reconciler = registry.for_key(key)
    except (registry.UnknownKind, ValueError):
        for uid in uids:
            resource_mirror_mark_deleted(uid)
        return
    resource_deletions_record([Deletion(reconciler, uid, None, "found gone (404) by a reconcile") for uid in uids])


def _transitions_observe(kind: str, moves: list[tuple[str, str, float | None]]) -> None:
    """opsconsole_transitions_total and opsconsole_time_in_phase_seconds for committed transitions."""
    try:
        for source, target, seconds in moves:
            metrics.TRANSITIONS.labels(kind, source, target).inc()
            if source and seconds is not None:
                metrics.TIME_IN_PHASE.labels(kind, source).observe(max(0.0, seconds))
    except Exception:  # metrics are never a reason to fail a recording
        log.debug("transition metrics not recorded", exc_info=True)


def transition_append(resource: Resource, **fields: Any) -> Transition:
    """Append the next chained Transition of `resource` (locked by the caller, inside its transaction) from
    its recorded phase to `to_phase`, and move the recorded phase and the chain head. No state-machine check
    here: callers decide (reconcile_record asks the kind's machine). `fields` are `transition_row`'s (to_phase,
    reason, message, actor, run, trace_id, at; generation and resource_version default to the mirror's)."""
    row = transition_row(resource, **fields)
    row.save(force_insert=True)
    head_moved(resource, row)
    return row


def transition_row(
    resource: Resource,
    *,
    to_phase: str,
    reason: str = "",
    message: str = "",
    actor: str = "controller",
    run: ReconcileRun | None = None,
    trace_id: str = "",
    at: datetime | None = None,
    generation: int | None = None,
    resource_version: str | None = None,
) -> Transition:
    """The next chained Transition of `resource` from its recorded phase to `to_phase`, hashed, not saved (see
    `transition_append`); `generation` and `resource_version` default to the mirror's."""
    if not _actor_valid(actor):
        raise ValueError(f"actor must be 'controller', 'user:<name>', 'rollback:<who>', 'kube:<user>' or 'unknown', "
                         f"not {actor!r}")
    # the chain head kept on the locked row (no query); the (resource_uid, seq) constraint guards a stale one
    seq, prev_hash = resource.last_transition_seq + 1, resource.last_transition_hash
    row = Transition(
        resource=resource,
        resource_uid=resource.uid,
        kind=resource.kind,
        namespace=resource.namespace,
        name=resource.name,
        seq=seq,
        from_phase=resource.phase,
        to_phase=to_phase,
        reason=reason[:255],
        message=message,
        generation=resource.generation if generation is None else generation,
        resource_version=resource.resource_version if resource_version is None else resource_version,
        actor=actor,
        run=run,
        trace_id=trace_id,
        created_at=at or timezone.now(),
        prev_hash=prev_hash,
    )
    row.hash = transition_hash(row_fields(row), prev_hash)
    return row


def resource_mirror_upsert(kind: ResourceKind, obj: dict) -> None:
    """Create or refresh the mirror of a live object (as the API returned it): metadata, spec, status,
    generation, labels, owner. Never the phase, its reason or the chain head (the recording owns those).
    An object not newer than the mirror (numeric resourceVersion at or below the recorded one) changes nothing."""
    resource_mirror_write([(kind, obj)])


def resource_mirror_write(objects: list[tuple[ResourceKind, dict]], deleted: Sequence[str] = ()) -> None:
    """`resource_mirror_upsert` for many objects and `resource_mirror_mark_deleted` for the `deleted` uids, in
    one transaction. On PostgreSQL the objects are one upsert statement (`recording_sql.mirror_upsert`); elsewhere
    the existing rows are locked in one query (in uid order, so two writers never deadlock), the missing ones
    created, the changed ones updated. Each uid is written at most once (its last object)."""
    latest = {o.uid: o for o in (ObservedObject.from_api(kind, obj) for kind, obj in objects)}
    if connection.vendor == "postgresql":  # one statement (recording_sql.mirror_upsert): no lock taken in Python
        from reconcilers.engine.recording_sql import mirror_upsert  # it builds on this module

        with transaction.atomic() if deleted else nullcontext():
            mirror_upsert(latest, timezone.now())
            for uid in deleted:
                resource_mirror_mark_deleted(uid)
        return
    with transaction.atomic():
        if latest:
            rows = _resources_locked(latest)
            now = timezone.now()
            changed = [rows[uid] for uid, o in latest.items() if mirror_observed(rows[uid], o, now, strictly=True)]
            for row in changed:
                row.updated_at = now
            _resources_update(changed, MIRROR_FIELDS)
        for uid in deleted:
            resource_mirror_mark_deleted(uid)


#: the Resource fields the controller's mirror writes (never the phase, its reason or the chain head)
MIRROR_FIELDS = ["namespace", "name", "key", "generation", "resource_version", "labels", "owner", "spec", "status",
                  "conditions", "observed_generation", "auto_rollback", "updated_at"]


def _resources_update(rows: list[Resource], names: list[str]) -> None:
    """UPDATE these fields of these (locked) rows: one statement sent for all rows (`executemany`), each value
    adapted by its field as `save()` would. Django's `bulk_update` builds a CASE per field and row instead,
    which costs the controller more CPU than the rest of its work."""
    if not rows:
        return
    connection = transaction.get_connection()
    fields = [Resource._meta.get_field(name) for name in names]
    pk = Resource._meta.pk
    qn = connection.ops.quote_name
    sql = (f"UPDATE {qn(Resource._meta.db_table)} SET {', '.join(f'{qn(f.column)} = %s' for f in fields)} "
           f"WHERE {qn(pk.column)} = %s")
    params = [[f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields]
              + [pk.get_db_prep_save(row.pk, connection)] for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _resources_locked(objects: dict[str, ObservedObject]) -> dict[str, Resource]:
    """The Resource rows of these uids, locked for this transaction; the missing ones created first."""
    def lock(uids: list[str]) -> dict[str, Resource]:
        return {r.uid: r for r in Resource.objects.select_for_update().filter(uid__in=uids).order_by("uid")}

    rows = lock(sorted(objects))
    missing = sorted(set(objects) - set(rows))
    if missing:  # created, or found created concurrently (that transaction has committed: its row is there)
        Resource.objects.bulk_create(
            [new_resource(o.kind, uid, o.namespace, o.name) for uid, o in objects.items() if uid in missing],
            ignore_conflicts=True,
        )
        rows.update(lock(missing))
    return rows


def resource_mirror_mark_deleted(uid: str) -> None:
    """Mark the mirror of an object that is gone from the API as deleted (once; a no-op when unknown)."""
    now = timezone.now()
    Resource.objects.filter(uid=uid, deleted=False).update(deleted=True, deleted_at=now, updated_at=now)


def _flag(value: Any) -> bool | None:
    """An annotation's "true" / "false" as a bool; None for anything else (unset)."""
    text = str(value or "").strip().lower()
    return {"true": True, "false": False}.get(text)


def _owner(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of the controller ownerReference in an object's metadata, if any."""
    ref = controller_ref(meta)
    return dict(ref) if ref is not None else None


def _error_text(run: RunRecord) -> str:
    parts = [p for p in (run.error_class, run.error_message) if p]
    return ": ".join(parts) or f"reconcile ended with {run.result}"


def _actor_valid(actor: str) -> bool:
    """A transition's actor (`reconcilers.core.actors`): the engine, a session, a rollback, the user the API
    server authenticated (`kube:`), or `unknown` (a deletion nobody could be established for). Never a claim."""
    return actor in (actors.ENGINE, actors.UNKNOWN) or any(
        actor.startswith(prefix) and len(actor) > len(prefix)
        for prefix in (actors.USER, actors.ROLLBACK, actors.KUBE))


def _is_newer(incoming: str, recorded: str, *, strictly: bool = False) -> bool:
    """resourceVersions are opaque, but numeric ones (etcd revisions, kubesim) may be compared: refuse to
    go back (and, `strictly`, to rewrite the version recorded). Anything else is taken as newer."""
    if incoming.isdigit() and recorded.isdigit():
        return int(incoming) > int(recorded) if strictly else int(incoming) >= int(recorded)
    return True


def new_resource(kind: ResourceKind, uid: str, namespace: str, name: str) -> Resource:
    namespace = namespace if kind.namespaced else ""
    return Resource(
        uid=uid,
        key=kind.request(namespace, name).key(),
        group=kind.group,
        version=kind.version,
        plural=kind.plural,
        kind=kind.kind,
        namespace=namespace,
        name=name,
    )


def _record(
    run: RunRecord,
    obj: ObservedObject,
    change: PhaseChange | None,
    machine: StateMachine,
    moves: list[tuple[str, str, float | None]],
    live: dict[str, Any] | None = None,
    out_of_band: OutOfBand | None = None,
    reconciler: Reconciler | None = None,
) -> RecordOutcome:
    now = timezone.now()
    resource = _resources_locked({obj.uid: obj})[obj.uid]
    from_phase = resource.phase
    mirror_observed(resource, obj, now)
    # before any transition of this run: the chain shows the spec change, then what it led to
    revision = revision_record(resource, live, now) if live is not None else None
    foreign_id = out_of_band_record(resource, out_of_band, obj.generation, now) if out_of_band else None

    request = None
    if run.request_token:
        request = (
            ReconcileRequest.objects.filter(token=run.request_token)
            .filter(Q(resource=resource) | Q(key=run.key))
            .order_by("-requested_at")
            .first()
        )
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
            anomaly_id = _anomaly_record(resource, change, machine, this_run)
        else:
            resource.reason, resource.message = change.reason[:255], change.message

    concluded, escalation = "", None
    if reconciler is not None and resource.rollback:
        from reconcilers.engine.healing.rollback import rollback_verify_locked  # healing builds on this module

        state = resource.rollback.get("state")
        escalation = rollback_verify_locked(resource, reconciler, now)
        if resource.rollback.get("state") != state:
            concluded = str(resource.rollback.get("state") or "")

    resource.last_reconcile_at = now
    resource.last_result = run.result
    resource.save()

    if run.request_token:
        _requests_finish(run, resource, request, this_run, transitions[0] if transitions else None, now)
    return RecordOutcome(this_run.id, [t.id for t in transitions], anomaly_id, from_phase, resource.phase,
                         transitions, revision.id if revision else None, foreign_id, concluded, escalation)


def mirror_observed(resource: Resource, obj: ObservedObject, now: datetime, *, strictly: bool = False) -> bool:
    """Copy what was observed onto the (locked) mirror row, saved by the caller; False (nothing copied) when
    the object is older than the mirror, or, `strictly`, not newer."""
    if resource.resource_version and not _is_newer(obj.resource_version, resource.resource_version,
                                                   strictly=strictly):
        return False
    resource.namespace = obj.namespace if obj.kind.namespaced else ""
    resource.name = obj.name
    resource.key = obj.kind.request(resource.namespace, obj.name).key()
    resource.generation = obj.generation
    resource.observed_generation = obj.observed_generation
    resource.resource_version = obj.resource_version
    resource.labels = dict(obj.labels)
    resource.owner = obj.owner
    resource.spec = obj.spec
    resource.status = obj.status
    resource.conditions = list(obj.conditions)
    resource.auto_rollback = obj.auto_rollback
    if obj.deleted and not resource.deleted:
        resource.deleted, resource.deleted_at = True, now
    return True


def _anomaly_record(resource: Resource, change: PhaseChange, machine: StateMachine, run_row: ReconcileRun) -> int:
    """The Anomaly for this refused change at this generation: the existing one, or a new one."""
    existing = (
        Anomaly.objects.filter(
            resource=resource, from_phase=resource.phase, to_phase=change.to_phase, generation=resource.generation,
            category=AnomalyCategory.REFUSED,
        )
        .values_list("id", flat=True)
        .first()
    )
    if existing is not None:
        return existing
    if change.to_phase not in machine.states:
        detail = f"{change.to_phase!r} is not a state of the {machine.name} state machine"
    else:
        allowed = ", ".join(machine.successors(resource.phase)) or "none"
        detail = f"{machine.name} does not allow {resource.phase or '(none)'} -> {change.to_phase} (allowed: {allowed})"
    anomaly = Anomaly.objects.create(
        resource=resource,
        from_phase=resource.phase,
        to_phase=change.to_phase,
        reason=change.reason[:255],
        message=change.message,
        detail=detail,
        generation=resource.generation,
        actor=change.actor,
        run=run_row,
    )
    return anomaly.id


def _requests_finish(
    run: RunRecord,
    resource: Resource,
    request: ReconcileRequest | None,
    run_row: ReconcileRun,
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
        run=run_row,
        transition=transition,
        error="" if succeeded else _error_text(run),
    )


# -- deletions without a finalizer, and objects gone while nobody watched ------------------------------------

#: the reason of the transitions recorded for an object found deleted (the watch's DELETED event, a re-list that
#: no longer has it, or a run whose GET answered 404)
OBJECT_DELETED = "ObjectDeleted"


@dataclass(frozen=True)
class Deletion:
    """An object of a registered kind found gone from the cluster: its reconciler (state machine, terminating
    and deleted phases), its uid, the last state seen of it (the DELETED event's object; None: the mirror's) and
    how it was found (for the message)."""

    reconciler: Reconciler
    uid: str
    obj: dict | None = None
    how: str = "deleted from the cluster"


def resource_deletions_record(deletions: Sequence[Deletion]) -> list[Transition]:
    """Record each object's deletion, in one transaction with the rows locked in uid order (two writers never
    deadlock): the chained transitions to the kind's deleted phase (through its terminating phase first when
    the machine goes that way; phases the machine does not declare are skipped), actor `controller`, reason
    `ObjectDeleted`, a message naming the last observed phase and generation; the mirror row marked deleted. The
    actor is who deleted it: the user of the admitted DELETE (`kube:<user>`, `provenance.deletion_actor`), else
    `unknown`, never the engine.

    Idempotent: a row already in the deleted phase gets nothing more (a DELETED event replayed, a deletion the
    finalizer flow recorded). A change the machine refuses is recorded as an Anomaly, as a reconcile's would
    be. An object with a last state but no mirror row yet (created and deleted between two mirror writes) gets
    its row first, so its deletion is on record too. Returns the transitions appended."""
    if not deletions:
        return []
    by_uid = {d.uid: d for d in deletions if d.uid}
    moves: list[tuple[str, str, float | None]] = []
    kinds: list[str] = []
    appended: list[Transition] = []
    for attempt in range(1, _ATTEMPTS + 1):
        moves.clear()
        kinds.clear()
        appended.clear()
        try:
            with transaction.atomic():
                observed = {uid: ObservedObject.from_api(d.reconciler.resource, d.obj)
                            for uid, d in by_uid.items() if d.obj is not None and _has_uid(d.obj, uid)}
                rows = _resources_locked(observed) if observed else {}
                rest = sorted(set(by_uid) - set(rows))
                if rest:
                    rows.update({r.uid: r for r in Resource.objects.select_for_update().filter(uid__in=rest)
                                 .order_by("uid")})
                now = timezone.now()
                for uid in sorted(rows):
                    row, deletion = rows[uid], by_uid[uid]
                    if uid in observed:
                        mirror_observed(row, observed[uid], now)
                    added = _deletion_append(row, deletion, now, moves)
                    kinds.extend(row.kind for _ in added)
                    appended.extend(added)
        except IntegrityError:  # a concurrent recording moved a chain first: redo from a fresh read
            if attempt == _ATTEMPTS:
                raise
            continue
        for kind, move in zip(kinds, moves, strict=True):
            _transitions_observe(kind, [move])
        if appended:
            hows = sorted({by_uid[t.resource_uid].how for t in appended if t.resource_uid in by_uid})
            log.info("recorded deleted: %s (%s)", ", ".join(sorted({t.resource_uid for t in appended})),
                     "; ".join(hows))
        return list(appended)
    raise AssertionError("unreachable")


def resource_mirror_sweep(reconciler: Reconciler, present: set[str], *, namespace: str | None = None,
                          listed_at: datetime | None = None) -> list[str]:
    """After a (re-)list of `reconciler`'s kind: record as deleted (`resource_deletions_record`) every live mirror
    row of that kind (in `namespace`, when the list was limited to one) whose uid is not in `present`, the uids
    the cluster has. Only rows created before `listed_at` (when the list began) are candidates: a row created
    since belongs to an object the list could not have seen yet. Returns the uids recorded deleted."""
    kind = reconciler.resource
    rows = Resource.objects.filter(group=kind.group, plural=kind.plural, deleted=False)
    if namespace is not None and kind.namespaced:
        rows = rows.filter(namespace=namespace)
    if listed_at is not None:
        rows = rows.filter(created_at__lt=listed_at)
    gone = sorted(set(rows.values_list("uid", flat=True)) - present)
    how = "not in the cluster's list when the controller (re-)listed (deleted while it was not watching)"
    for start in range(0, len(gone), 500):
        resource_deletions_record([Deletion(reconciler, uid, None, how) for uid in gone[start:start + 500]])
    return gone


def _has_uid(obj: dict, uid: str) -> bool:
    return str((obj.get("metadata") or {}).get("uid") or "") == uid


def _deletion_plan(machine: StateMachine, current: str, terminating: str | None, deleted: str | None,
                   change: PhaseChange) -> tuple[list[PhaseChange], str | None]:
    """The phase changes that record a deletion from `current`, and the target the machine refused (None when
    none): through the terminating phase first, as the finalizer flow goes, else straight to the deleted one."""
    target = deleted or terminating
    if target is None or current == target or machine.is_terminal(current):
        return [], None
    chains: list[list[str]] = []
    if terminating and deleted and current != terminating:
        chains.append([terminating, deleted])
    chains.append([target])
    for chain in chains:
        source: str | None = current
        for phase in chain:
            phases, refused = machine.path(source, phase)
            if refused:
                break
            source = phases[-1] if phases else source
        else:
            return [PhaseChange(phase, change.reason, change.message, change.actor) for phase in chain], None
    return [PhaseChange(target, change.reason, change.message, change.actor)], target


def _deletion_append(row: Resource, deletion: Deletion, now: datetime,
                     moves: list[tuple[str, str, float | None]]) -> list[Transition]:
    """The deletion record of one locked row (see resource_deletions_record); saves the row."""
    rec = deletion.reconciler
    machine = rec.state_machine
    terminating = rec.terminating_phase if rec.terminating_phase in machine.states else None
    deleted = rec.deleted_phase if rec.deleted_phase in machine.states else None
    last = (row.status or {}).get("phase") or row.phase or "(none)"
    message = (f"{deletion.how}; last observed phase {last}, generation {row.generation}"
               + (f", resourceVersion {row.resource_version}" if row.resource_version else ""))
    changes, refused = _deletion_plan(machine, row.phase, terminating, deleted,
                                      PhaseChange(deleted or terminating or "", OBJECT_DELETED, message,
                                                  actors.UNKNOWN))
    if changes:  # who deleted it, looked up only when there is a deletion to record
        actor = provenance.deletion_actor(rec.resource, row.namespace, row.name, row.uid)
        changes = [PhaseChange(c.to_phase, c.reason, c.message, actor) for c in changes]
    appended: list[Transition] = []
    for change in changes:
        planned, refused_here = plan_transitions(machine, row.phase, change)
        for move in planned:
            since = row.phase_since
            moves.append((row.phase, move.to_phase, (now - since).total_seconds() if since else None))
            appended.append(transition_append(row, to_phase=move.to_phase, reason=move.reason,
                                              message=move.message, actor=change.actor, at=now))
        if refused_here and refused is not None:
            _anomaly_record(row, change, machine, None)
        elif not refused_here:
            row.reason, row.message = change.reason[:255], change.message
    if not row.deleted:
        row.deleted, row.deleted_at = True, now
    row.save()
    return appended
