"""Reconcile requests' identities in the signed checkpoints (issue 37).

A request's `identity_hash` (`reconcilers.models.chain.request_identity_hash`) is not keyed: whoever owns the
database can rewrite a request's actor or reason and store the recomputed hash, and `audit.requests_verify`
sees nothing. A checkpoint (format 2) therefore also holds one leaf per request, `[id, identity_hash]`, sorted by
id, in the file (`request_leaves`) and signs their Merkle root and number (`requests`: `{"root", "size"}`).
Verifying names every request the checkpoint saw that is gone (`removed`) or whose identity hash is not the
one it saw (`rewritten`). Requests made after the checkpoint are covered by the next one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconcilers.engine.audit import REMOVED, RecordProblem
from reconcilers.engine.merkle import leaf_hash, merkle_root
from reconcilers.models import ReconcileRequest

#: the file's unsigned list of leaves (the signed part holds their root)
LEAVES = "request_leaves"
REWRITTEN, FORGED = "rewritten", "forged"


def request_leaves() -> list[list[str]]:
    """`[id, identity_hash]` of every reconcile request, sorted by id (read in the caller's snapshot)."""
    return sorted([str(pk), digest] for pk, digest in ReconcileRequest.objects.values_list("id", "identity_hash"))


def signed_summary(leaves: list[list[str]]) -> dict[str, Any]:
    """What the checkpoint signs of the leaves: their number and Merkle root (hex)."""
    return {"size": len(leaves), "root": merkle_root([leaf_hash(["request", *leaf]) for leaf in leaves]).hex()}


def _batches(items: list[str], size: int = 1000) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def requests_against(seq: Any, doc: dict[str, Any]) -> list[RecordProblem]:
    """The requests the checkpoint `doc` saw against the database (run in the caller's snapshot); nothing for a
    checkpoint without request leaves (format 1)."""
    summary = doc.get("requests")
    if not isinstance(summary, dict):
        return []
    leaves = doc.get(LEAVES)
    if not isinstance(leaves, list) or not all(isinstance(leaf, list) and len(leaf) == 2 for leaf in leaves):
        return [RecordProblem("checkpoint", f"{seq} requests", FORGED, "its request leaves are missing or malformed")]
    if signed_summary(leaves) != {"size": summary.get("size"), "root": summary.get("root")}:
        return [RecordProblem("checkpoint", f"{seq} requests", FORGED,
                              "its request leaves do not make its signed request root")]
    now: dict[str, tuple[str, str]] = {}
    for batch in _batches([str(leaf[0]) for leaf in leaves]):
        for pk, key, digest in ReconcileRequest.objects.filter(id__in=batch).values_list("id", "key", "identity_hash"):
            now[str(pk)] = (key, digest)
    problems = []
    for pk, then in leaves:
        found = now.get(str(pk))
        if found is None:
            problems.append(RecordProblem("checkpoint", f"{seq} request id={pk}", REMOVED,
                                          f"the reconcile request checkpoint {seq} saw is gone"))
        elif found[1] != then:
            problems.append(RecordProblem("checkpoint", f"{seq} request id={pk}", REWRITTEN,
                                          f"{found[0]}: its identity (key, token, actor, reason, requested_at) is "
                                          f"not the one checkpoint {seq} saw: rewritten, its identity hash "
                                          "recomputed"))
    return problems
