"""Deletions without a finalizer, and objects gone while nobody watched: the chained transitions to the kind's
deleted phase.

An object found gone (the watch's DELETED event, a re-list that no longer has it: `resource_mirror_sweep`, a run
whose GET answered 404: `resource_mirror_gone`) has its deletion recorded by `resource_deletions_record`, in one
transaction with the rows locked in uid order, as a transition (or two, through the terminating phase) by who
deleted it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from reconcilers.core import actors
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import Reconciler
from reconcilers.core.statemachine import StateMachine
from reconcilers.engine import provenance
from reconcilers.engine.recording_anomalies import anomaly_record
from reconcilers.engine.recording_mirror import resource_mirror_mark_deleted, resources_locked
from reconcilers.engine.recording_rows import (
    Move,
    ObservedObject,
    mirror_observed,
    transition_append,
    transitions_observe,
)
from reconcilers.engine.step import PhaseChange, plan_transitions
from reconcilers.models import Resource, Transition

log = logging.getLogger(__name__)
#: record a deletion again from a fresh read after a unique-constraint conflict, at most this many times
_ATTEMPTS = 5

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
    cluster: str = DEFAULT_CLUSTER  # the cluster it was deleted from (a row first created here is filed there)


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
    moves: list[Move] = []
    kinds: list[str] = []
    appended: list[Transition] = []
    for attempt in range(1, _ATTEMPTS + 1):
        moves.clear()
        kinds.clear()
        appended.clear()
        try:
            with transaction.atomic():
                observed = {uid: ObservedObject.from_api(d.reconciler.resource, d.obj, d.cluster)
                            for uid, d in by_uid.items() if d.obj is not None and _has_uid(d.obj, uid)}
                rows = resources_locked(observed) if observed else {}
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
            transitions_observe(kind, [move])
        if appended:
            hows = sorted({by_uid[t.resource_uid].how for t in appended if t.resource_uid in by_uid})
            log.info("recorded deleted: %s (%s)", ", ".join(sorted({t.resource_uid for t in appended})),
                     "; ".join(hows))
        return list(appended)
    raise AssertionError("unreachable")


def resource_mirror_sweep(reconciler: Reconciler, present: set[str], *, namespace: str | None = None,
                          listed_at: datetime | None = None, cluster: str = DEFAULT_CLUSTER) -> list[str]:
    """After a (re-)list of `reconciler`'s kind in `cluster`: record as deleted (`resource_deletions_record`)
    every live mirror row of that kind in that cluster (in `namespace`, when the list was limited to one) whose
    uid is not in `present`, the uids the cluster has. Rows of any other cluster are never candidates: one
    cluster's list says nothing about another's objects. Only rows created before `listed_at` (when the list
    began) are candidates: a row created since belongs to an object the list could not have seen yet. Returns the
    uids recorded deleted."""
    kind = reconciler.resource
    rows = Resource.objects.filter(cluster=cluster, group=kind.group, plural=kind.plural, deleted=False)
    if namespace is not None and kind.namespaced:
        rows = rows.filter(namespace=namespace)
    if listed_at is not None:
        rows = rows.filter(created_at__lt=listed_at)
    gone = sorted(set(rows.values_list("uid", flat=True)) - present)
    how = "not in the cluster's list when the controller (re-)listed (deleted while it was not watching)"
    for start in range(0, len(gone), 500):
        resource_deletions_record([Deletion(reconciler, uid, None, how) for uid in gone[start:start + 500]])
    return gone


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
                     moves: list[Move]) -> list[Transition]:
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
        actor = provenance.deletion_actor(rec.resource, row.namespace, row.name, row.uid, row.cluster)
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
            anomaly_record(row, change, machine, None)
        elif not refused_here:
            row.reason, row.message = change.reason[:255], change.message
    if not row.deleted:
        row.deleted, row.deleted_at = True, now
    row.save()
    return appended
