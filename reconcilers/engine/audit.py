"""Tamper evidence for the transition log: a canonical encoding, a per-resource hash chain, its verification.

Each `Transition` stores `prev_hash` (the `hash` of the previous row of the same resource, '' for seq 1) and
`hash` = sha256 of the canonical encoding of its fields plus `prev_hash`. The resource's mirror row stores
the chain's head (`last_transition_seq`, `last_transition_hash`) in the same transaction, so removing or
editing the newest row is detected too.

`chain_verify()` walks every chain in seq order and reports, per broken chain, the first broken row and what
is wrong with it:

- `edited`: a row's fields no longer match its hash, or its hash no longer matches what the next row (or the
  resource's head) recorded;
- `removed`: a seq number is missing (gap or missing tail), or a row's predecessor is gone;
- `reordered`: rows are out of order (a row's prev_hash names a row that comes after it; ids out of seq order);
- `inserted`: rows beyond the head the engine recorded.

It detects changes made behind the ORM's back (raw SQL, a DBA with the triggers disabled); it cannot detect a
rewrite that recomputes every later hash *and* the resource's head, since the hash is not keyed.

Spec revisions (`SpecRevision`) are links of the same chain, between the transitions: a revision stores the
transition seq it follows (`chain_after`), its own seq among the resource's revisions (1, 2, 3…) and, like a
transition, `prev_hash` (the hash of the chain's previous link, transition or revision) and `hash` (sha256 of
its fields, `REVISION_HASHED_FIELDS`, plus prev_hash, with `"link": "revision"` in the encoding, so a revision
never hashes like a transition). The resource's head keeps the hash of the newest link, the transition count
and the revision count (`last_revision_seq`). Transition seqs stay 1, 2, 3… with no gaps; the chain's order
is transitions by seq with each revision right after the transition it follows. An edited, removed, reordered
or inserted revision is reported like a transition (`ChainBreak.item == "revision"`), and so is a transition
whose predecessor revision was tampered with.

Healing records (`HealingRecord`: anomalies, rollbacks, suspends, pins) are links of the same chain too, placed
like revisions: after the transition they follow (`chain_after`) and after the revision they follow
(`revision_after`), with their own seq (1, 2, 3…), `"link": "healing"` in the encoding, and their count in the
resource's head (`last_healing_seq`). The chain's order is therefore: transition t, then the revisions and
healing records that follow it, a revision r before the healing records that follow r.

The encoding and the hashes are `audit_encoding`'s (one encoder, `link_encoding`, parameterised by each link
kind's field list); one chain's check against its head is `audit_chains`'s; this module reads the chains in one
snapshot and reports (`chain_verify`), and checks the records outside the chains (`record_verify`). Every name is
importable from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from reconcilers.engine.audit_chains import (  # noqa: F401 - importers know them from here
    EDITED,
    INSERTED,
    MOVED,
    REMOVED,
    REORDERED,
    ChainBreak,
    Head,
    verify_chain,
    verify_links,
    verify_moved,
)
from reconcilers.engine.audit_encoding import (  # noqa: F401 - importers know them from here
    ENCODING_VERSION,
    HASH_VERSION,
    HASHED_FIELDS,
    HASHED_FIELDS_V2,
    HASHED_FIELDS_V3,
    HEALING,
    HEALING_HASHED_FIELDS,
    HEALING_HASHED_FIELDS_V3,
    REVISION,
    REVISION_HASHED_FIELDS,
    REVISION_HASHED_FIELDS_V2,
    REVISION_HASHED_FIELDS_V3,
    TRANSITION,
    canonical_encoding,
    hashed_fields,
    healing_encoding,
    healing_fields,
    healing_hash,
    healing_hashed_fields,
    link_encoding,
    link_fields,
    link_hash,
    revision_encoding,
    revision_fields,
    revision_hash,
    row_fields,
    transition_hash,
)
from reconcilers.models import ActionRecord, HealingRecord, Resource, SpecRevision, Transition


@dataclass
class VerifyReport:
    """What `chain_verify` found: how much it checked, and the first broken row of each broken chain."""

    chains: int = 0
    transitions: int = 0
    revisions: int = 0
    healing: int = 0
    breaks: list[ChainBreak] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every chain verified."""
        return not self.breaks


_COLUMNS = ("id", "hash", "prev_hash", "hash_version", *HASHED_FIELDS_V3)
_REVISION_COLUMNS = ("id", "hash", "prev_hash", "hash_version", *REVISION_HASHED_FIELDS_V3)
_HEALING_COLUMNS = ("id", "hash", "prev_hash", "hash_version", *HEALING_HASHED_FIELDS_V3)


def _chain_rows(resource_uid: str | None, model: Any = Transition, columns: tuple[str, ...] = _COLUMNS
                ) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Yield (uid, rows in (seq, id) order) per chain, streaming the table in uid order."""
    qs = model.objects.all()
    if resource_uid is not None:
        qs = qs.filter(resource_uid=resource_uid)
    current: str | None = None
    rows: list[dict[str, Any]] = []
    for row in qs.order_by("resource_uid", "seq", "id").values(*columns).iterator(chunk_size=2000):
        if row["resource_uid"] != current:
            if current is not None:
                yield current, rows
            current, rows = row["resource_uid"], []
        rows.append(row)
    if current is not None:
        yield current, rows


def _owners_of_rows(resource_uid: str | None) -> tuple[dict[int, str], dict[int, str]]:
    """Resource id → uid, and id → cluster, for the rows the chains are filed under: every resource for the
    whole record; for one chain, only the resources its links name (a page about one resource does not read the
    whole mirror)."""
    qs = Resource.objects.all()
    if resource_uid is not None:
        named = Q(uid=resource_uid)
        for model in (Transition, SpecRevision, HealingRecord):
            named |= Q(id__in=model.objects.filter(resource_uid=resource_uid).values("resource_id"))
        qs = qs.filter(named)
    uid_of, cluster_of = {}, {}
    for pk, uid, cluster in qs.values_list("id", "uid", "cluster"):
        uid_of[pk], cluster_of[pk] = uid, cluster
    return uid_of, cluster_of


def _heads(resource_uid: str | None) -> dict[str, Head]:
    qs = Resource.objects.filter(Q(last_transition_seq__gt=0) | Q(last_revision_seq__gt=0)
                                 | Q(last_healing_seq__gt=0))
    if resource_uid is not None:
        qs = qs.filter(uid=resource_uid)
    return {
        r["uid"]: Head(r["last_transition_seq"], r["last_transition_hash"], r["kind"], r["namespace"], r["name"],
                        r["last_revision_seq"], r["last_healing_seq"])
        for r in qs.values("uid", "last_transition_seq", "last_transition_hash", "kind", "namespace", "name",
                           "last_revision_seq", "last_healing_seq")
    }


@contextmanager
def _consistent_read() -> Iterator[None]:
    """One snapshot for the heads and the chains, so a reconcile committing meanwhile raises no false alarm:
    REPEATABLE READ on PostgreSQL; on SQLite the transaction's lock keeps writers out until the end."""
    if connection.in_atomic_block:  # the caller's transaction decides
        yield
        return
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def chain_verify(resource_uid: str | None = None) -> VerifyReport:
    """Verify every chain (or one resource's): the report lists the first broken row of each broken chain,
    oldest row first."""
    report = VerifyReport()
    with _consistent_read():
        heads = _heads(resource_uid)
        uid_of, cluster_of = _owners_of_rows(resource_uid)
        # revisions are few per resource (one per generation): held in memory, the transitions streamed
        revisions = dict(_chain_rows(resource_uid, SpecRevision, _REVISION_COLUMNS))
        healing = dict(_chain_rows(resource_uid, HealingRecord, _HEALING_COLUMNS))
        seen: set[str] = set()
        for uid, rows in _chain_rows(resource_uid):
            seen.add(uid)
            report.chains += 1
            report.transitions += len(rows)
            found = (verify_moved(uid, rows, revisions.get(uid, []), uid_of, healing.get(uid), cluster_of)
                     or verify_links(uid, rows, revisions.get(uid, []), heads.get(uid), healing.get(uid)))
            if found is not None:
                report.breaks.append(found)
    for uid in sorted((set(heads) | set(revisions) | set(healing)) - seen):
        report.chains += 1
        found = (verify_moved(uid, [], revisions.get(uid, []), uid_of, healing.get(uid), cluster_of)
                 or verify_links(uid, [], revisions.get(uid, []), heads.get(uid), healing.get(uid)))
        if found is not None:
            report.breaks.append(found)
    report.revisions = sum(len(rows) for rows in revisions.values())
    report.healing = sum(len(rows) for rows in healing.values())
    report.breaks.sort(key=lambda b: (b.transition_id is None, b.transition_id or 0, b.resource_uid))
    return report


# -- the action record's chain and the reconcile requests' identities (issue 20) -----------------------------


@dataclass(frozen=True)
class RecordProblem:
    """Something wrong with the record outside the per-resource chains: `record` is `action` (the action
    record's chain), `request` (a reconcile request's identity) or `checkpoint` (the database against the newest
    signed checkpoint); `ident` names the row or the chain."""

    record: str
    ident: str
    problem: str
    detail: str

    def describe(self) -> str:
        """One line: what, which row, the problem, the detail."""
        return f"{self.record} {self.ident}: {self.problem}: {self.detail}"


def actions_verify() -> list[RecordProblem]:
    """Walk the action record's chain in seq order: the first edited, removed or reordered record (one problem
    at most: what follows a break cannot be trusted either). A cut tail is found against a checkpoint only."""
    from reconcilers.models.chain import ACTION_HASHED_FIELDS, action_hash

    expected_prev, expected_seq = "", 1
    qs = ActionRecord.objects.order_by("seq", "id").values("id", "prev_hash", "hash", "cluster", *ACTION_HASHED_FIELDS)
    for row in qs.iterator(chunk_size=2000):
        ident = f"seq={row['seq']} id={row['id']}"
        if row["seq"] < expected_seq:
            return [RecordProblem("action", ident, REORDERED, f"seq {row['seq']} appears twice or out of order")]
        if row["seq"] > expected_seq:
            gap = f"seq {expected_seq}" if row["seq"] == expected_seq + 1 else f"seqs {expected_seq}..{row['seq'] - 1}"
            return [RecordProblem("action", ident, REMOVED, f"{gap} missing before it")]
        if action_hash(row, row["prev_hash"]) != row["hash"]:
            return [RecordProblem("action", ident, EDITED, "its fields no longer match its hash")]
        if row["prev_hash"] != expected_prev:
            return [RecordProblem("action", ident, EDITED, "its prev_hash is not the previous record's hash")]
        expected_prev, expected_seq = row["hash"], row["seq"] + 1
    return []


def requests_verify() -> list[RecordProblem]:
    """Every reconcile request whose identity (key, token, actor, reason, idempotency key, requested_at) no longer
    matches the hash taken when it was made. A deleted request is found against a checkpoint's count."""
    from reconcilers.models import ReconcileRequest
    from reconcilers.models.chain import REQUEST_IDENTITY_FIELDS, request_identity_hash

    problems = []
    qs = ReconcileRequest.objects.order_by("requested_at", "id").values("identity_hash", *REQUEST_IDENTITY_FIELDS)
    for row in qs.iterator(chunk_size=2000):
        if request_identity_hash(row) != row["identity_hash"]:
            problems.append(RecordProblem("request", f"id={row['id']} ({row['key']})", EDITED,
                                          "its identity (key, token, actor, reason, requested_at) no longer matches "
                                          "its hash"))
    return problems


def record_verify() -> list[RecordProblem]:
    """The action record's chain and the reconcile requests' identities, read in one snapshot."""
    with _consistent_read():
        return actions_verify() + requests_verify()
