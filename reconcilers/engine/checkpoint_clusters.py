"""Every cluster's chains in the signed checkpoints (issue 41).

One database records the objects of several clusters, and a checkpoint (`reconcilers.engine.checkpoint`) covers
every chain of every cluster. Since format 3 it says which: the leaf of a chain of another cluster than the default
names it, `[uid, transitions, revisions, head hash, healing records, cluster]` (a chain of the default cluster
keeps the leaf it always had, `[uid, transitions, revisions, head hash(, healing records)]`), and the signed part
holds `clusters`: per cluster the number of chains, the sum of their transition, revision and healing record
counts and the Merkle root of that cluster's leaves (in uid order, as the tree's). A verifier thus sees each
cluster's chains, and a cluster's history cut from the database is named by cluster.

Verifying a format 3 checkpoint: its leaves must make the signed `clusters` (else `forged`), and each chain it
saw must still be in the cluster it saw it in (a resource row moved to another cluster is `moved`). Format 1 and 2
checkpoints name no cluster: their chains are checked as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine.audit import MOVED, RecordProblem
from reconcilers.engine.merkle import leaf_hash, merkle_root
from reconcilers.models import Resource

FORGED = "forged"
#: the Resource columns a leaf is made of, in `leaf_of`'s order
LEAF_COLUMNS = ("uid", "last_transition_seq", "last_revision_seq", "last_transition_hash", "last_healing_seq",
                "cluster")


def leaf_of(uid: str, transitions: int, revisions: int, head: str, healing: int, cluster: str) -> list[Any]:
    """A chain's leaf: `[uid, transitions, revisions, head hash]`, its healing record count when it has any or
    when it is of another cluster than the default, then that cluster."""
    if cluster and cluster != DEFAULT_CLUSTER:
        return [uid, transitions, revisions, head, healing, cluster]
    return [uid, transitions, revisions, head, *([healing] if healing else [])]


def leaf_cluster(leaf: list[Any]) -> str:
    """The cluster a leaf names (DEFAULT_CLUSTER when it names none)."""
    return str(leaf[5]) if len(leaf) > 5 else DEFAULT_CLUSTER


def clusters_summary(leaves: Iterable[list[Any]]) -> dict[str, dict[str, Any]]:
    """What a checkpoint signs of each cluster's chains: their number, their transitions, revisions and healing
    records, and the Merkle root (hex) of the cluster's leaves in their order."""
    by_cluster: dict[str, list[list[Any]]] = {}
    for leaf in leaves:
        by_cluster.setdefault(leaf_cluster(leaf), []).append(leaf)
    return {
        cluster: {"chains": len(held), "transitions": sum(int(leaf[1]) for leaf in held),
                  "revisions": sum(int(leaf[2]) for leaf in held),
                  "healing": sum(int(leaf[4]) if len(leaf) > 4 else 0 for leaf in held),
                  "root": merkle_root([leaf_hash(leaf) for leaf in held]).hex()}
        for cluster, held in sorted(by_cluster.items())
    }


def describe(summary: dict[str, dict[str, Any]]) -> str:
    """One line: each cluster with its chains (`default 3 chains, b 1 chain`)."""
    return ", ".join(f"{cluster} {info.get('chains', 0)} chain{'' if info.get('chains') == 1 else 's'}"
                     for cluster, info in sorted(summary.items()))


def _batches(items: list[str], size: int = 1000) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def clusters_against(seq: Any, doc: dict[str, Any], leaves: list[list[Any]]) -> list[RecordProblem]:
    """A format 3 checkpoint's clusters: its leaves against its signed `clusters`, then each chain against the
    cluster it was seen in (run in the caller's snapshot). Nothing for a checkpoint without `clusters`."""
    signed = doc.get("clusters")
    if signed is None:
        return []
    if not isinstance(signed, dict) or clusters_summary(leaves) != signed:
        return [RecordProblem("checkpoint", f"{seq} clusters", FORGED,
                              "its leaves do not make its signed per-cluster chains and roots")]
    seen = {str(leaf[0]): leaf_cluster(leaf) for leaf in leaves}
    now: dict[str, str] = {}
    for batch in _batches(sorted(seen)):
        now.update(Resource.objects.filter(uid__in=batch).values_list("uid", "cluster"))
    return [RecordProblem("checkpoint", f"{seq} resource={uid}", MOVED,
                          f"its chain is in cluster {now[uid]} now, checkpoint {seq} saw it in cluster {cluster}")
            for uid, cluster in seen.items() if uid in now and now[uid] != cluster]
