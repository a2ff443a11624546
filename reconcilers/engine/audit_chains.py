"""One chain checked against its head: `verify_chain` (transitions only) and `verify_links` (transitions, spec
revisions and healing records in chain order), each naming the first broken link (`ChainBreak`) as edited,
removed, reordered, inserted or moved (see `reconcilers.engine.audit`, which reads the chains and reports).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine.audit_encoding import (
    HEALING,
    REVISION,
    TRANSITION,
    healing_fields,
    healing_hash,
    revision_fields,
    revision_hash,
    row_fields,
    transition_hash,
)

EDITED, REMOVED, REORDERED, INSERTED, MOVED = "edited", "removed", "reordered", "inserted", "moved"


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
    cluster: str = ""  # the cluster of the chain's resource, when known ('' and DEFAULT_CLUSTER are not shown)

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
        if self.cluster and self.cluster != DEFAULT_CLUSTER:
            where = f"{where} in cluster {self.cluster}"
        ident = self.transition_id if self.transition_id is not None else "-"
        return (
            f"resource={self.resource_uid} ({self.kind} {where}) {self.position} id={ident}: "
            f"{self.problem}: {self.detail}"
        )


@dataclass(frozen=True)
class Head:
    """A resource's chain head as recorded on its row: the transition count, the newest link's hash, the
    revision and healing record counts."""

    seq: int
    hash: str
    kind: str
    namespace: str
    name: str
    revisions: int = 0
    healing: int = 0


def verify_chain(uid: str, rows: list[dict[str, Any]], head: Head | None) -> ChainBreak | None:
    """Check one chain (rows in (seq, id) order, as dicts with id, hash, prev_hash and HASHED_FIELDS) against
    its head; return its first broken row, or None when it is intact."""

    named = rows[0] if rows else None
    kind, namespace, name = (
        (named["kind"], named["namespace"], named["name"]) if named else (head.kind, head.namespace, head.name)
        if head else ("", "", "")
    )

    cluster = named.get("cluster", "") if named else ""

    def broken(row: dict[str, Any] | None, seq: int, problem: str, detail: str) -> ChainBreak:
        return ChainBreak(uid, seq, row["id"] if row else None, problem, detail, kind, namespace, name,
                          cluster=cluster)

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
                 head: Head | None, healing: list[dict[str, Any]] | None = None) -> ChainBreak | None:
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

    cluster = named.get("cluster", "") if named else ""

    def broken(row: dict[str, Any] | None, seq: int, problem: str, detail: str, item: str) -> ChainBreak:
        return ChainBreak(uid, seq, row["id"] if row else None, problem, detail, kind, namespace, name, item,
                          cluster)

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


def verify_moved(uid: str, transitions: list[dict[str, Any]], revisions: list[dict[str, Any]],
                 uid_of: dict[int, str], healing: list[dict[str, Any]] | None = None,
                 cluster_of: dict[int, str] | None = None) -> ChainBreak | None:
    """The first link of `uid`'s chain filed under another Resource row (`resource_id`) than its own uid's:
    a row moved into another resource's history (and so perhaps another namespace's); with `cluster_of` (Resource
    id → cluster), also a link whose `cluster` is not its resource's: a row moved into another cluster's record
    (which a format 1 or 2 link's hash does not cover)."""
    for item, rows in ((TRANSITION, transitions), (REVISION, revisions), (HEALING, healing or [])):
        for row in rows:
            owner = uid_of.get(row["resource_id"])
            if owner != uid:
                where = (f"resource {owner}" if owner
                         else f"a resource row that does not exist (id {row['resource_id']})")
                return ChainBreak(uid, row["seq"], row["id"], MOVED,
                                  f"it is filed under {where}, not under its own resource {uid}",
                                  row["kind"], row["namespace"], row["name"], item, row.get("cluster", ""))
            home = cluster_of.get(row["resource_id"]) if cluster_of is not None else None
            if home is not None and "cluster" in row and row["cluster"] != home:
                return ChainBreak(uid, row["seq"], row["id"], MOVED,
                                  f"it is recorded in cluster {row['cluster']}, its resource {uid} is in cluster "
                                  f"{home}", row["kind"], row["namespace"], row["name"], item, home)
    return None
