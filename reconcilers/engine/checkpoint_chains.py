"""The resource chains against a signed checkpoint's leaves (`reconcilers.engine.checkpoint`): each chain the
checkpoint saw still has its links (not fewer: a cut tail or a rewound head: `cut`; none at all: `removed`), a head
(`zeroed` when emptied), and the head it saw is still a link of that chain (else `rewritten`: a history rewritten
with its hashes recomputed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count

from reconcilers.engine.audit import REMOVED, RecordProblem
from reconcilers.models import HealingRecord, Resource, SpecRevision, Transition

CUT, ZEROED, REWRITTEN = "cut", "zeroed", "rewritten"


def _problem(seq: Any, ident: str, problem: str, detail: str) -> RecordProblem:
    return RecordProblem("checkpoint", f"{seq} {ident}".strip(), problem, detail)


def _in_batches(items: list[str], size: int = 1000) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def chains_against(seq: Any, leaves: list[list[Any]]) -> list[RecordProblem]:
    """Each resource chain the checkpoint `seq` saw (its leaves) against the database (run in the caller's
    snapshot): the problems found, at most one per chain."""
    uids = [leaf[0] for leaf in leaves]
    heads: dict[str, tuple[int, int, str, str, int]] = {}
    transitions: dict[str, int] = {}
    revisions: dict[str, int] = {}
    healing: dict[str, int] = {}
    linked: set[tuple[str, str]] = set()
    wanted = [leaf[3] for leaf in leaves]
    for batch in _in_batches(uids):
        for uid, t, r, h, kind, ns, name, k in Resource.objects.filter(uid__in=batch).values_list(
                "uid", "last_transition_seq", "last_revision_seq", "last_transition_hash", "kind", "namespace", "name",
                "last_healing_seq"):
            heads[uid] = (t, r, h, f"{kind} {ns + '/' if ns else ''}{name}", k)
        for model, counted in ((Transition, transitions), (SpecRevision, revisions), (HealingRecord, healing)):
            counted.update(model.objects.filter(resource_uid__in=batch).values_list("resource_uid")
                           .annotate(n=Count("id")).values_list("resource_uid", "n"))
    for batch in _in_batches(wanted):
        for model in (Transition, SpecRevision, HealingRecord):
            linked.update(model.objects.filter(hash__in=batch).values_list("resource_uid", "hash"))
    problems = []
    for uid, t_then, r_then, h_then, *rest in leaves:
        k_then = int(rest[0]) if rest else 0
        ident = f"resource={uid}"
        t_rows, r_rows = transitions.get(uid, 0), revisions.get(uid, 0)
        if healing.get(uid, 0) < k_then or (uid in heads and heads[uid][4] < k_then):
            problems.append(_problem(seq, ident, CUT, f"{heads[uid][3] if uid in heads else uid}: "
                                     f"{healing.get(uid, 0)} healing records now, the checkpoint saw {k_then}"))
            continue
        head = heads.get(uid)
        what = head[3] if head else "(its resource row is gone)"
        if t_rows == 0 and r_rows == 0 and not healing.get(uid):
            problems.append(_problem(seq, ident, REMOVED, f"{what}: its whole history is gone (the checkpoint saw "
                                     f"{t_then} transitions and {r_then} revisions)"))
            continue
        if t_rows < t_then or r_rows < r_then:
            problems.append(_problem(seq, ident, CUT, f"{what}: {t_rows} transitions and {r_rows} revisions now, "
                                     f"the checkpoint saw {t_then} and {r_then}"))
            continue
        if head is None or (head[0], head[1], head[4]) == (0, 0, 0) or not head[2]:
            problems.append(_problem(seq, ident, ZEROED, f"{what}: its head is empty, the checkpoint saw "
                                     f"{t_then} transitions and {r_then} revisions"))
            continue
        if head[0] < t_then or head[1] < r_then:
            problems.append(_problem(seq, ident, CUT, f"{what}: its head was rewound to {head[0]} transitions and "
                                     f"{head[1]} revisions, the checkpoint saw {t_then} and {r_then}"))
            continue
        if (uid, h_then) not in linked:
            problems.append(_problem(seq, ident, REWRITTEN, f"{what}: the head the checkpoint saw ({h_then[:16]}…) "
                                     "is no longer a link of its chain"))
    return problems
