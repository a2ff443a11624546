"""What a recording writes, built in memory: the run as measured, the object as observed, the outcome, and the rows.

The dataclasses the runner and the controller hand to the recording (`RunRecord`, `ObservedObject`) and the one it
hands back (`RecordOutcome`); the row builders both recording paths share, so the locked transaction
(`recording`) and the one-statement record (`recording_sql`) write the same rows, hashed the same way: the run's
row (`run_row`), the chained transitions (`transition_row`, `transitions_planned`) and spec revision
(`revision_row`), both appended through `chain_link`, and the mirror's copy of the observed object
(`mirror_observed`, `new_resource`). Nothing here queries the database except `transition_append`'s insert (and
`revision_row`'s provenance look-up).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from reconcilers.core import actors
from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join, key_split
from reconcilers.core.meta import AUTO_ROLLBACK, controller_ref, parse_rfc3339, spec_diff, spec_writers
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import metrics, provenance
from reconcilers.engine.chain_link import head_moved, link_append, link_row
from reconcilers.engine.step import PhaseChange
from reconcilers.models import ReconcileRequest, ReconcileRun, Resource, SpecRevision, Transition

log = logging.getLogger(__name__)

#: the Resource fields the controller's mirror writes (never the phase, its reason or the chain head)
MIRROR_FIELDS = ["namespace", "name", "key", "generation", "resource_version", "labels", "owner", "spec", "status",
                 "conditions", "observed_generation", "auto_rollback", "updated_at"]

#: a phase move, for the metrics: (from, to, seconds spent in the phase left; None when unknown)
Move = tuple[str, str, float | None]


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
    cluster: str = DEFAULT_CLUSTER  # the cluster the object lives in (its row's `cluster`, its key's prefix)

    @classmethod
    def from_api(cls, kind: ResourceKind, obj: dict[str, Any], cluster: str = DEFAULT_CLUSTER) -> ObservedObject:
        """What the mirror keeps of an object of `cluster` as the API returned it."""
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
            auto_rollback=_flag((meta.get("annotations") or {}).get(AUTO_ROLLBACK)), cluster=cluster,
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
    operator_version: str = ""  # the operator version that executed it (versions.operator_version)
    triggers: list[dict[str, Any]] = field(default_factory=list)  # why it ran (reconcilers.engine.triggers)
    triggers_dropped: int = 0  # triggers coalesced beyond the bound


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


def run_row(run: RunRecord, resource: Resource | None, *, request: ReconcileRequest | None = None,
            run_id: int | None = None) -> ReconcileRun:
    """The `ReconcileRun` row of `run` (not saved), filed under `resource` and its cluster (the key's without
    one), with the manual `request` it handled and, when given, the id reserved for it."""
    return ReconcileRun(
        id=run_id, key=run.key, kind=run.kind, resource=resource,
        cluster=resource.cluster if resource is not None else cluster_of_key(run.key), started_at=run.started_at,
        duration_seconds=run.duration_seconds, result=run.result, error_class=run.error_class[:255],
        error_message=run.error_message, attempt=run.attempt, worker=run.worker[:255], trace_id=run.trace_id,
        request=request, operator_version=run.operator_version[:128], triggers=run.triggers,
        triggers_dropped=run.triggers_dropped,
    )


def cluster_of_key(key: str) -> str:
    """The cluster a workqueue key names (`reconcilers.core.clusters.key_split`); DEFAULT_CLUSTER for a string
    that is no reconcile key (it names no other cluster)."""
    try:
        return key_split(key)[0]
    except ValueError:
        return DEFAULT_CLUSTER


def actor_valid(actor: str) -> bool:
    """A transition's actor (`reconcilers.core.actors`): the engine, a session, a rollback, the user the API
    server authenticated (`kube:`), or `unknown` (a deletion nobody could be established for). Never a claim."""
    return actor in (actors.ENGINE, actors.UNKNOWN) or any(
        actor.startswith(prefix) and len(actor) > len(prefix)
        for prefix in (actors.USER, actors.ROLLBACK, actors.KUBE))


def actor_refused(actor: str) -> ValueError:
    """The error of a transition actor `actor_valid` refuses."""
    return ValueError(f"actor must be 'controller', 'user:<name>', 'rollback:<who>', 'kube:<user>' or 'unknown', "
                      f"not {actor!r}")


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
    if not actor_valid(actor):
        raise actor_refused(actor)
    return link_row(
        resource, Transition, from_phase=resource.phase, to_phase=to_phase, reason=reason[:255], message=message,
        generation=resource.generation if generation is None else generation,
        resource_version=resource.resource_version if resource_version is None else resource_version,
        actor=actor, run=run, trace_id=trace_id, created_at=at or timezone.now(),
    )


def transition_append(resource: Resource, **fields: Any) -> Transition:
    """Append the next chained Transition of `resource` (locked by the caller, inside its transaction) from
    its recorded phase to `to_phase`, and move the recorded phase and the chain head. No state-machine check
    here: callers decide (reconcile_record asks the kind's machine). `fields` are `transition_row`'s (to_phase,
    reason, message, actor, run, trace_id, at; generation and resource_version default to the mirror's)."""
    return link_append(resource, transition_row(resource, **fields))


def transitions_planned(resource: Resource, planned: Sequence[Any], change: PhaseChange, run: ReconcileRun,
                        obj: ObservedObject, at: datetime, moves: list[Move]) -> list[Transition]:
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


def revision_row(resource: Resource, live: dict[str, Any], at: datetime, previous: dict[str, Any]) -> SpecRevision:
    """The next chained `SpecRevision` of `resource` for the live object's generation (not saved): its spec, the
    diff from `previous` (the last revision's spec, {} for the first) and who changed it."""
    meta = live.get("metadata") or {}
    spec = live.get("spec") or {}
    diff = spec_diff(previous, spec)
    writers = spec_writers(live, diff) or []
    top = writers[0] if writers else {}
    with provenance.in_cluster(resource.cluster):  # the admitted writes of the row's cluster, whoever records it
        actor, _admitted = provenance.revision_actor(provenance.kind_of(live), live, str(top.get("manager") or ""),
                                                     resource.rollback)
    return link_row(
        resource, SpecRevision, generation=int(meta.get("generation") or 0),
        resource_version=str(meta.get("resourceVersion") or ""), spec=spec, diff=diff, actor=actor[:255],
        operation=str(top.get("operation") or "")[:32], managers=writers, changed_at=parse_rfc3339(top.get("time")),
        created_at=at,
    )


def transitions_observe(kind: str, moves: list[Move]) -> None:
    """opsconsole_transitions_total, opsconsole_time_in_phase_seconds and opsconsole_phase_seconds (the phase
    objectives' indicator) for committed transitions."""
    try:
        for source, target, seconds in moves:
            metrics.TRANSITIONS.labels(kind, source, target).inc()
            if source and seconds is not None:
                metrics.TIME_IN_PHASE.labels(kind, source).observe(max(0.0, seconds))
                metrics.PHASE_SECONDS.labels(kind, source).observe(max(0.0, seconds))
    except Exception:  # metrics are never a reason to fail a recording
        log.debug("transition metrics not recorded", exc_info=True)


def new_resource(kind: ResourceKind, uid: str, namespace: str, name: str,
                 cluster: str = DEFAULT_CLUSTER) -> Resource:
    """A new mirror row (not saved) for the object `uid` of `kind` in `cluster`."""
    namespace = namespace if kind.namespaced else ""
    return Resource(
        uid=uid,
        cluster=cluster,
        key=key_join(cluster, kind.request(namespace, name).key()),
        group=kind.group,
        version=kind.version,
        plural=kind.plural,
        kind=kind.kind,
        namespace=namespace,
        name=name,
    )


def mirror_observed(resource: Resource, obj: ObservedObject, now: datetime, *, strictly: bool = False) -> bool:
    """Copy what was observed onto the (locked) mirror row, saved by the caller; False (nothing copied) when
    the object is older than the mirror, or, `strictly`, not newer."""
    if resource.resource_version and not _is_newer(obj.resource_version, resource.resource_version,
                                                   strictly=strictly):
        return False
    resource.namespace = obj.namespace if obj.kind.namespaced else ""
    resource.name = obj.name
    resource.key = key_join(resource.cluster, obj.kind.request(resource.namespace, obj.name).key())  # row's cluster
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


def _is_newer(incoming: str, recorded: str, *, strictly: bool = False) -> bool:
    """resourceVersions are opaque, but numeric ones (etcd revisions, kubesim) may be compared: refuse to
    go back (and, `strictly`, to rewrite the version recorded). Anything else is taken as newer."""
    if incoming.isdigit() and recorded.isdigit():
        return int(incoming) > int(recorded) if strictly else int(incoming) >= int(recorded)
    return True


def _flag(value: Any) -> bool | None:
    """An annotation's "true" / "false" as a bool; None for anything else (unset)."""
    text = str(value or "").strip().lower()
    return {"true": True, "false": False}.get(text)


def _owner(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of the controller ownerReference in an object's metadata, if any."""
    ref = controller_ref(meta)
    return dict(ref) if ref is not None else None
