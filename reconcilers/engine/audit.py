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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from reconcilers.models import ActionRecord, HealingRecord, Resource, SpecRevision, Transition

#: the fields covered by a transition's hash, in the canonical encoding (prev_hash is added to them)
HASHED_FIELDS: tuple[str, ...] = (
    "resource_uid",
    "kind",
    "namespace",
    "name",
    "seq",
    "from_phase",
    "to_phase",
    "reason",
    "message",
    "generation",
    "resource_version",
    "actor",
    "run_id",
    "trace_id",
    "created_at",
)
ENCODING_VERSION = 1
#: hash format 2 (rows written since migration 0007, `hash_version` 2) also covers the row's `resource_id`, the
#: Resource it is filed under, so a row cannot be moved into another resource's history; format 1 rows keep
#: verifying with format 1 (their `resource_id` is checked against their `resource_uid` instead)
HASH_VERSION = 2
HASHED_FIELDS_V2: tuple[str, ...] = (*HASHED_FIELDS, "resource_id")

#: the fields covered by a spec revision's hash (prev_hash and `"link": "revision"` are added to them)
REVISION_HASHED_FIELDS: tuple[str, ...] = (
    "resource_uid",
    "kind",
    "namespace",
    "name",
    "seq",
    "chain_after",
    "generation",
    "resource_version",
    "spec",
    "diff",
    "actor",
    "operation",
    "managers",
    "changed_at",
    "created_at",
)
REVISION_HASHED_FIELDS_V2: tuple[str, ...] = (*REVISION_HASHED_FIELDS, "resource_id")
#: the fields covered by a healing record's hash (prev_hash and `"link": "healing"` are added); format 2 only
HEALING_HASHED_FIELDS: tuple[str, ...] = (
    "resource_uid",
    "resource_id",
    "kind",
    "namespace",
    "name",
    "seq",
    "chain_after",
    "revision_after",
    "action",
    "rule",
    "actor",
    "reason",
    "message",
    "generation",
    "target_generation",
    "detail",
    "expires_at",
    "created_at",
)
TRANSITION, REVISION, HEALING = "transition", "revision", "healing"

EDITED, REMOVED, REORDERED, INSERTED, MOVED = "edited", "removed", "reordered", "inserted", "moved"


def _version(fields: Mapping[str, Any]) -> int:
    version = fields.get("hash_version", ENCODING_VERSION)
    if version not in (1, 2):
        raise ValueError(f"unknown hash format {version!r}")
    return int(version)


def hashed_fields(version: int = ENCODING_VERSION, *, revision: bool = False) -> tuple[str, ...]:
    """The fields a transition's (or a revision's) hash covers in hash format `version`."""
    if revision:
        return REVISION_HASHED_FIELDS if version == 1 else REVISION_HASHED_FIELDS_V2
    return HASHED_FIELDS if version == 1 else HASHED_FIELDS_V2


def _canonical_value(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("transition times must be timezone-aware")
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    return value


def link_encoding(fields: Mapping[str, Any], prev_hash: str, names: tuple[str, ...], *, version: int,
                  link: str | None = None, noun: str = TRANSITION, lenient: bool = False) -> bytes:
    """The canonical encoding of one link of a chain, the one encoder of every link kind: a JSON object of the
    `names` of `fields` + prev_hash + the hash format as `v` (+ the link kind as `link`, when given: a transition
    has none), keys sorted (JSON values such as a spec too), no whitespace, UTF-8, times as UTC ISO-8601 with
    microseconds. A field missing from `fields` is a KeyError naming the `noun`; `lenient` encodes a value JSON
    does not know as its str() (a healing record's evidence) instead of refusing it."""
    missing = [name for name in names if name not in fields]
    if missing:
        raise KeyError(f"missing {noun} fields: {missing}")
    doc = {name: _canonical_value(fields[name]) for name in names}
    doc["prev_hash"] = prev_hash
    if link is not None:
        doc["link"] = link
    doc["v"] = version
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str if lenient else None).encode("utf-8")


def _sha256(encoded: bytes) -> str:
    return hashlib.sha256(encoded).hexdigest()


def canonical_encoding(fields: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a transition's hash covers: `link_encoding` of the hashed fields of its format
    (`fields["hash_version"]`, 1 when absent: HASHED_FIELDS; 2: HASHED_FIELDS_V2), no `link`."""
    version = _version(fields)
    return link_encoding(fields, prev_hash, hashed_fields(version), version=version)


def transition_hash(fields: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 (hex) of `canonical_encoding(fields, prev_hash)`."""
    return _sha256(canonical_encoding(fields, prev_hash))


def revision_encoding(fields: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a spec revision's hash covers: `link_encoding` of REVISION_HASHED_FIELDS (_V2 in format 2), with
    `"link": "revision"`."""
    version = _version(fields)
    return link_encoding(fields, prev_hash, hashed_fields(version, revision=True), version=version, link=REVISION,
                         noun=REVISION)


def revision_hash(fields: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 (hex) of `revision_encoding(fields, prev_hash)`."""
    return _sha256(revision_encoding(fields, prev_hash))


def healing_encoding(fields: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a healing record's hash covers: `link_encoding` of HEALING_HASHED_FIELDS, `"link": "healing"`,
    format 2, lenient (the evidence may hold values JSON does not know)."""
    return link_encoding(fields, prev_hash, HEALING_HASHED_FIELDS, version=HASH_VERSION, link=HEALING,
                         noun="healing record", lenient=True)


def healing_hash(fields: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 (hex) of `healing_encoding(fields, prev_hash)`."""
    return _sha256(healing_encoding(fields, prev_hash))


def _get(row: Any, name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)


def link_fields(row: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The `names` of a link: a model instance's attributes or a `.values()` dict's items (a name it lacks
    raises)."""
    if isinstance(row, Mapping):
        return {name: row[name] for name in names}
    return {name: getattr(row, name) for name in names}


def healing_fields(row: Any) -> dict[str, Any]:
    """The hashed fields of a HealingRecord instance (or of a dict from `.values()`)."""
    return link_fields(row, HEALING_HASHED_FIELDS)


def _fields_of(row: Any, revision: bool) -> dict[str, Any]:
    version = _get(row, "hash_version", ENCODING_VERSION) or ENCODING_VERSION
    fields = link_fields(row, hashed_fields(version, revision=revision))
    fields["hash_version"] = version
    return fields


def revision_fields(row: Any) -> dict[str, Any]:
    """The hashed fields of a SpecRevision instance (or of a dict from `.values()`), for its hash format
    (`hash_version`, included)."""
    return _fields_of(row, revision=True)


def row_fields(row: Any) -> dict[str, Any]:
    """The hashed fields of a Transition instance (or of a dict from `.values()`), for its hash format
    (`hash_version`, included)."""
    return _fields_of(row, revision=False)


def link_hash(row: Transition | SpecRevision | HealingRecord) -> str:
    """The hash of a link built in memory (a Transition, SpecRevision or HealingRecord instance), chained onto
    its `prev_hash`, in its own hash format."""
    if isinstance(row, SpecRevision):
        return revision_hash(revision_fields(row), row.prev_hash)
    if isinstance(row, HealingRecord):
        return healing_hash(healing_fields(row), row.prev_hash)
    return transition_hash(row_fields(row), row.prev_hash)


@dataclass(frozen=True)
class ChainBreak:
    """The first broken row of one chain. `transition_id` is None when the broken row is missing."""

    resource_uid: str
    seq: int
    transition_id: int | None
    problem: str
    detail: str
    kind: str = ""
    namespace: str = ""
    name: str = ""
    item: str = TRANSITION  # or REVISION / HEALING: `seq` and `transition_id` are then that link's seq and id

    @property
    def position(self) -> str:
        """`seq=N` for a transition, `revision=N` for a spec revision, `healing=N` for a healing record."""
        if self.item == REVISION:
            return f"revision={self.seq}"
        if self.item == HEALING:
            return f"healing={self.seq}"
        return f"seq={self.seq}"

    def describe(self) -> str:
        """One line naming the row: resource, seq (or revision), id, then what is wrong."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        ident = self.transition_id if self.transition_id is not None else "-"
        return (
            f"resource={self.resource_uid} ({self.kind} {where}) {self.position} id={ident}: "
            f"{self.problem}: {self.detail}"
        )


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


@dataclass(frozen=True)
class _Head:
    seq: int
    hash: str
    kind: str
    namespace: str
    name: str
    revisions: int = 0
    healing: int = 0


_COLUMNS = ("id", "hash", "prev_hash", "hash_version", *HASHED_FIELDS_V2)
_REVISION_COLUMNS = ("id", "hash", "prev_hash", "hash_version", *REVISION_HASHED_FIELDS_V2)
_HEALING_COLUMNS = ("id", "hash", "prev_hash", *HEALING_HASHED_FIELDS)


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


def _heads(resource_uid: str | None) -> dict[str, _Head]:
    qs = Resource.objects.filter(Q(last_transition_seq__gt=0) | Q(last_revision_seq__gt=0)
                                 | Q(last_healing_seq__gt=0))
    if resource_uid is not None:
        qs = qs.filter(uid=resource_uid)
    return {
        r["uid"]: _Head(r["last_transition_seq"], r["last_transition_hash"], r["kind"], r["namespace"], r["name"],
                        r["last_revision_seq"], r["last_healing_seq"])
        for r in qs.values("uid", "last_transition_seq", "last_transition_hash", "kind", "namespace", "name",
                           "last_revision_seq", "last_healing_seq")
    }


def verify_chain(uid: str, rows: list[dict[str, Any]], head: _Head | None) -> ChainBreak | None:
    """Check one chain (rows in (seq, id) order, as dicts with id, hash, prev_hash and HASHED_FIELDS) against
    its head; return its first broken row, or None when it is intact."""

    named = rows[0] if rows else None
    kind, namespace, name = (
        (named["kind"], named["namespace"], named["name"]) if named else (head.kind, head.namespace, head.name)
        if head else ("", "", "")
    )

    def broken(row: dict[str, Any] | None, seq: int, problem: str, detail: str) -> ChainBreak:
        return ChainBreak(uid, seq, row["id"] if row else None, problem, detail, kind, namespace, name)

    position_of_hash = {row["hash"]: i for i, row in enumerate(rows)}
    expected_prev, expected_seq = "", 1
    for i, row in enumerate(rows):
        seq = row["seq"]
        if row["prev_hash"] != expected_prev and position_of_hash.get(row["prev_hash"], -1) > i:
            later = rows[position_of_hash[row["prev_hash"]]]
            return broken(
                row, seq, REORDERED, f"it chains onto the row now at seq {later['seq']} (id {later['id']}), after it"
            )
        if seq < expected_seq:
            return broken(row, seq, REORDERED, f"seq {seq} appears twice or out of order (expected {expected_seq})")
        if seq > expected_seq:
            gap = f"seq {expected_seq}" if seq == expected_seq + 1 else f"seqs {expected_seq}..{seq - 1}"
            return broken(row, seq, REMOVED, f"{gap} missing before it")
        if transition_hash(row_fields(row), row["prev_hash"]) != row["hash"]:
            return broken(row, seq, EDITED, "its fields no longer match its hash")
        if row["prev_hash"] != expected_prev:
            if i == 0:
                return broken(row, seq, EDITED, "seq 1 must have an empty prev_hash")
            prev = rows[i - 1]
            if row["prev_hash"] in position_of_hash:
                return broken(row, seq, REORDERED, "its predecessor is not the row before it")
            return broken(
                prev, prev["seq"], EDITED, f"its hash changed: seq {seq} (id {row['id']}) recorded another one"
            )
        if i > 0 and row["id"] < rows[i - 1]["id"]:
            return broken(row, seq, REORDERED, f"id {row['id']} is older than seq {seq - 1}'s id {rows[i - 1]['id']}")
        expected_prev, expected_seq = row["hash"], seq + 1

    last_seq = rows[-1]["seq"] if rows else 0
    if head is None:
        if rows:
            return broken(rows[0], rows[0]["seq"], INSERTED, "the resource records no transitions")
        return None
    if head.seq > last_seq:
        gap = f"seq {head.seq}" if head.seq == last_seq + 1 else f"seqs {last_seq + 1}..{head.seq}"
        return broken(None, last_seq + 1, REMOVED, f"{gap} missing at the end (the resource records {head.seq})")
    if head.seq < last_seq:
        extra = rows[[r["seq"] for r in rows].index(head.seq + 1)] if head.seq + 1 <= last_seq else rows[-1]
        return broken(extra, extra["seq"], INSERTED, f"the resource records only {head.seq} transitions")
    if head.hash != rows[-1]["hash"]:
        return broken(rows[-1], last_seq, EDITED, "its hash differs from the head the resource recorded")
    return None


def _link_order(row: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """A link's place in the chain: transitions by seq; after each, the revisions that follow it, each healing
    record after the revision it follows (see the module docstring)."""
    if row["_link"] == REVISION:
        return (row["chain_after"], row["seq"], 0, 0, row["id"])
    if row["_link"] == HEALING:
        return (row["chain_after"], row["revision_after"], 1, row["seq"], row["id"])
    return (row["seq"], -1, 0, 0, row["id"])


def _link_hash(row: dict[str, Any]) -> str:
    if row["_link"] == REVISION:
        return revision_hash(revision_fields(row), row["prev_hash"])
    if row["_link"] == HEALING:
        return healing_hash(healing_fields(row), row["prev_hash"])
    return transition_hash(row_fields(row), row["prev_hash"])


_NOUNS = {TRANSITION: "seq", REVISION: "revision", HEALING: "healing"}


def _link_name(row: dict[str, Any]) -> str:
    return f"{_NOUNS[row['_link']]} {row['seq']} (id {row['id']})"


def _numbered_gap(rows: list[dict[str, Any]], recorded: int, item: str) -> tuple[int, str] | None:
    """The first seq missing from a revision or healing record sequence (1..max(recorded, the highest seq)) and
    where it is missing, or None."""
    present = {row["seq"] for row in rows}
    top = max([recorded, *present])
    missing = sorted(set(range(1, top + 1)) - present)
    if not missing:
        return None
    where = "at the end" if missing[0] > max(present, default=0) else "before a later one"
    noun = "revisions" if item == REVISION else "healing records"
    return missing[0], f"{_NOUNS[item]} {missing[0]} missing {where} (the resource records {top} {noun})"


def verify_links(uid: str, transitions: list[dict[str, Any]], revisions: list[dict[str, Any]],
                 head: _Head | None, healing: list[dict[str, Any]] | None = None) -> ChainBreak | None:
    """Check one resource's chain of transitions, spec revisions and healing records (each in (seq, id) order,
    as dicts with id, hash, prev_hash and their hashed fields) against its head; return its first broken link,
    or None. A chain of transitions only is checked by `verify_chain`."""
    healing = healing or []
    if not revisions and not healing and (head is None or (head.revisions == 0 and head.healing == 0)):
        return verify_chain(uid, transitions, head)
    named = transitions[0] if transitions else revisions[0] if revisions else healing[0] if healing else None
    kind, namespace, name = (
        (named["kind"], named["namespace"], named["name"]) if named else (head.kind, head.namespace, head.name)
        if head else ("", "", "")
    )

    def broken(row: dict[str, Any] | None, seq: int, problem: str, detail: str, item: str) -> ChainBreak:
        return ChainBreak(uid, seq, row["id"] if row else None, problem, detail, kind, namespace, name, item)

    for item, rows, recorded in ((REVISION, revisions, head.revisions if head else 0),
                                 (HEALING, healing, head.healing if head else 0)):
        gap = _numbered_gap(rows, recorded, item)
        if gap is not None:
            return broken(None, gap[0], REMOVED, gap[1], item)

    links = sorted([{**r, "_link": TRANSITION} for r in transitions] + [{**r, "_link": REVISION} for r in revisions]
                   + [{**r, "_link": HEALING} for r in healing], key=_link_order)
    position_of_hash = {row["hash"]: i for i, row in enumerate(links)}
    expected_prev = ""
    expected = {TRANSITION: 1, REVISION: 1, HEALING: 1}
    last_id: dict[str, int] = {}
    for i, row in enumerate(links):
        item, seq = row["_link"], row["seq"]
        noun = _NOUNS[item]
        if row["prev_hash"] != expected_prev and position_of_hash.get(row["prev_hash"], -1) > i:
            later = links[position_of_hash[row["prev_hash"]]]
            return broken(row, seq, REORDERED, f"it chains onto {_link_name(later)}, after it", item)
        if seq < expected[item] or (seq > expected[item] and item != TRANSITION):
            return broken(row, seq, REORDERED, f"{noun} {seq} appears twice or out of order "
                          f"(expected {expected[item]})", item)
        if seq > expected[item]:
            gap = f"seq {expected[item]}" if seq == expected[item] + 1 else f"seqs {expected[item]}..{seq - 1}"
            return broken(row, seq, REMOVED, f"{gap} missing before it", item)
        if _link_hash(row) != row["hash"]:
            return broken(row, seq, EDITED, "its fields no longer match its hash", item)
        if row["prev_hash"] != expected_prev:
            if i == 0:
                return broken(row, seq, EDITED, "the chain's first link must have an empty prev_hash", item)
            prev = links[i - 1]
            if row["prev_hash"] in position_of_hash:
                return broken(row, seq, REORDERED, "its predecessor is not the link before it", item)
            return broken(prev, prev["seq"], EDITED,
                          f"its hash changed: {_link_name(row)} recorded another one", prev["_link"])
        if item in last_id and row["id"] < last_id[item]:
            return broken(row, seq, REORDERED, f"id {row['id']} is older than the previous {noun}'s", item)
        last_id[item] = row["id"]
        expected_prev, expected[item] = row["hash"], seq + 1

    last_seq, last_revision, last_healing = expected[TRANSITION] - 1, expected[REVISION] - 1, expected[HEALING] - 1
    if head is None:
        return broken(links[0], links[0]["seq"], INSERTED, "the resource records no transitions or revisions",
                      links[0]["_link"]) if links else None
    if head.seq > last_seq:
        gap = f"seq {head.seq}" if head.seq == last_seq + 1 else f"seqs {last_seq + 1}..{head.seq}"
        return broken(None, last_seq + 1, REMOVED, f"{gap} missing at the end (the resource records {head.seq})",
                      TRANSITION)
    if head.seq < last_seq:
        extra = next(r for r in links if r["_link"] == TRANSITION and r["seq"] == head.seq + 1)
        return broken(extra, extra["seq"], INSERTED, f"the resource records only {head.seq} transitions", TRANSITION)
    if head.revisions < last_revision:
        extra = next(r for r in links if r["_link"] == REVISION and r["seq"] == head.revisions + 1)
        return broken(extra, extra["seq"], INSERTED, f"the resource records only {head.revisions} revisions",
                      REVISION)
    if head.healing < last_healing:
        extra = next(r for r in links if r["_link"] == HEALING and r["seq"] == head.healing + 1)
        return broken(extra, extra["seq"], INSERTED,
                      f"the resource records only {head.healing} healing records", HEALING)
    if links and head.hash != links[-1]["hash"]:
        return broken(links[-1], links[-1]["seq"], EDITED, "its hash differs from the head the resource recorded",
                      links[-1]["_link"])
    return None


def _moved(uid: str, transitions: list[dict[str, Any]], revisions: list[dict[str, Any]],
           uid_of: dict[int, str], healing: list[dict[str, Any]] | None = None) -> ChainBreak | None:
    """The first link of `uid`'s chain filed under another Resource row (`resource_id`) than its own uid's:
    a row moved into another resource's history (and so perhaps another namespace's)."""
    for item, rows in ((TRANSITION, transitions), (REVISION, revisions), (HEALING, healing or [])):
        for row in rows:
            owner = uid_of.get(row["resource_id"])
            if owner != uid:
                where = (f"resource {owner}" if owner
                         else f"a resource row that does not exist (id {row['resource_id']})")
                return ChainBreak(uid, row["seq"], row["id"], MOVED,
                                  f"it is filed under {where}, not under its own resource {uid}",
                                  row["kind"], row["namespace"], row["name"], item)
    return None


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
        uid_of = dict(Resource.objects.values_list("id", "uid"))
        # revisions are few per resource (one per generation): held in memory, the transitions streamed
        revisions = dict(_chain_rows(resource_uid, SpecRevision, _REVISION_COLUMNS))
        healing = dict(_chain_rows(resource_uid, HealingRecord, _HEALING_COLUMNS))
        seen: set[str] = set()
        for uid, rows in _chain_rows(resource_uid):
            seen.add(uid)
            report.chains += 1
            report.transitions += len(rows)
            found = (_moved(uid, rows, revisions.get(uid, []), uid_of, healing.get(uid))
                     or verify_links(uid, rows, revisions.get(uid, []), heads.get(uid), healing.get(uid)))
            if found is not None:
                report.breaks.append(found)
    for uid in sorted((set(heads) | set(revisions) | set(healing)) - seen):
        report.chains += 1
        found = (_moved(uid, [], revisions.get(uid, []), uid_of, healing.get(uid))
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
    qs = ActionRecord.objects.order_by("seq", "id").values("id", "prev_hash", "hash", *ACTION_HASHED_FIELDS)
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
