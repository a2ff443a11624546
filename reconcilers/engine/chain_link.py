"""The one chain-link append: a resource's hash chain grows by a transition, a spec revision or a healing record.

Every link is appended the same way, with the resource's row locked by the caller inside its transaction: read
the head kept on the row (its newest link's hash, `last_transition_hash`, and the link kind's own count), build
the link under the resource (uid, cluster, kind, namespace, name) in the current hash format (HASH_VERSION, which
covers the cluster) with the next seq of its kind and its place in the chain (a revision follows the current
transition, `chain_after`; a healing record the current transition and revision, `revision_after`), hash it
(`audit_encoding.link_hash`), then move the head onto it (`head_moved`; the caller saves the row). No query: the
`(resource_uid, seq)` unique constraints guard a stale head.

`recording_rows.transition_row`, `recording_rows.revision_row` and `healing.records.healing_append` build on it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from reconcilers.engine.audit_encoding import HASH_VERSION, link_hash
from reconcilers.models import HealingRecord, Resource, SpecRevision, Transition

Link = TypeVar("Link", Transition, SpecRevision, HealingRecord)

#: the Resource field counting each link kind (its head's seq)
_COUNTS: dict[type, str] = {Transition: "last_transition_seq", SpecRevision: "last_revision_seq",
                            HealingRecord: "last_healing_seq"}


def link_row(resource: Resource, model: type[Link], **fields: Any) -> Link:
    """The next link of kind `model` on `resource`'s chain, hashed (format HASH_VERSION), not saved: filed under
    `resource` and its cluster, its seq the next of its kind, chained onto the head's hash, placed after the
    current transition (and revision, for a healing record); `fields` are the link's own (a transition's phases, a
    revision's spec, ...)."""
    place: dict[str, Any] = {}
    if model is not Transition:
        place["chain_after"] = resource.last_transition_seq
    if model is HealingRecord:
        place["revision_after"] = resource.last_revision_seq
    row = model(resource=resource, resource_uid=resource.uid, cluster=resource.cluster, kind=resource.kind,
                namespace=resource.namespace, name=resource.name, hash_version=HASH_VERSION,
                seq=getattr(resource, _COUNTS[model]) + 1, prev_hash=resource.last_transition_hash, **place, **fields)
    row.hash = link_hash(row)
    return row


def head_moved(resource: Resource, row: Transition | SpecRevision | HealingRecord) -> None:
    """Move `resource`'s chain head (in memory, saved by the caller) onto `row`, a link just appended: a
    transition moves the phase and the transition count, a revision the revision count, a healing record the
    healing count; every link becomes the head's hash."""
    if isinstance(row, SpecRevision):
        resource.last_revision_seq = row.seq
    elif isinstance(row, HealingRecord):
        resource.last_healing_seq = row.seq
    else:
        resource.phase, resource.phase_since = row.to_phase, row.created_at
        resource.last_transition_seq = row.seq
    resource.last_transition_hash = row.hash


def link_append(resource: Resource, row: Link) -> Link:
    """Save `row` (built by `link_row` on `resource`, locked by the caller) and move the head onto it."""
    row.save(force_insert=True)
    head_moved(resource, row)
    return row
