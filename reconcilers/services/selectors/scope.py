"""What a caller limited by grants may see: a `Scope` of (cluster, namespace) pairs, and the one place a row's
visibility is decided from it (`Scope.q` for querysets, `Scope.allows` for one object).

A pair's cluster '' means every cluster (a grant made before clusters existed keeps its meaning); its namespace ''
is the cluster scope (cluster-scoped objects), as everywhere. A caller that is not limited has no Scope at all
(None), as before.

A Scope is also a frozenset of its namespace names, so code that only shows or counts the namespaces a caller has
(the console's "your namespaces") keeps working; what decides visibility is `pairs`. Two Scopes are equal when
their pairs are; a Scope equals a plain set of namespaces when every pair is of every cluster. The selectors'
`namespace_q` builds its Q from the pairs when given a Scope, so every read limited by it is cluster-aware."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

#: a pair's cluster that means every cluster
EVERY_CLUSTER = ""


def _cluster_column(column: str) -> str:
    """The cluster column beside a namespace column: `namespace` -> `cluster`, `resource__namespace` ->
    `resource__cluster`."""
    head, _, _last = column.rpartition("namespace")
    return f"{head}cluster"


class Scope(frozenset[str]):
    """(cluster, namespace) pairs a caller may see; as a frozenset, the namespace names."""

    pairs: frozenset[tuple[str, str]]

    def __new__(cls, pairs: Iterable[tuple[str, str]]) -> Scope:
        held = frozenset((str(c), str(ns)) for c, ns in pairs)
        self = super().__new__(cls, {ns for _c, ns in held})
        self.pairs = held
        return self

    @classmethod
    def of(cls, grants: Iterable[str]) -> Scope:
        """The Scope of grants written `cluster/namespace` or `namespace` (every cluster)."""
        return cls(parse_grant(g) for g in grants)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Scope, (tuple(sorted(self.pairs)),))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Scope):
            return self.pairs == other.pairs
        if isinstance(other, (set, frozenset)):
            return self.pairs == {(EVERY_CLUSTER, ns) for ns in other}
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:  # as a plain set's when equal to one (every pair of every cluster)
        if all(c == EVERY_CLUSTER for c, _ns in self.pairs):
            return frozenset.__hash__(self)
        return hash(self.pairs)

    def __repr__(self) -> str:
        return f"Scope({sorted(self.pairs)!r})"

    def allows(self, cluster: str, namespace: str) -> bool:
        """Whether an object in `cluster` and `namespace` ('' the cluster scope) is inside."""
        return (cluster, namespace) in self.pairs or (EVERY_CLUSTER, namespace) in self.pairs

    def allows_cluster(self, cluster: str) -> bool:
        """Whether anything of `cluster` may be inside."""
        return any(c in (EVERY_CLUSTER, cluster) for c, _ns in self.pairs)

    def covers(self, other: Scope | frozenset[str]) -> bool:
        """Whether all `other` may see is inside this Scope (a pair of every cluster only within one of every
        cluster)."""
        pairs = other.pairs if isinstance(other, Scope) else {(EVERY_CLUSTER, ns) for ns in other}
        return all((EVERY_CLUSTER, ns) in self.pairs if c == EVERY_CLUSTER else self.allows(c, ns)
                   for c, ns in pairs)

    def q(self, column: str = "namespace") -> Q:
        """A Q limiting rows to this Scope by their namespace `column` and the cluster column beside it."""
        by_cluster: dict[str, set[str]] = {}
        for c, ns in self.pairs:
            by_cluster.setdefault(c, set()).add(ns)
        if not by_cluster:
            return Q(pk__in=[])
        cluster_column = _cluster_column(column)
        q = Q(pk__in=[])
        for c, spaces in sorted(by_cluster.items()):
            inside = Q(**{f"{column}__in": sorted(spaces)})
            q |= inside if c == EVERY_CLUSTER else inside & Q(**{cluster_column: c})
        return q

    def sql(self, column: str = "namespace", cluster_column: str = "cluster") -> tuple[str, list[str]]:
        """This Scope as a raw query's condition and its parameters (the `q` of a raw query)."""
        parts: list[str] = []
        params: list[str] = []
        for c, ns in sorted(self.pairs):
            if c == EVERY_CLUSTER:
                parts.append(f"{column} = %s")
                params.append(ns)
            else:
                parts.append(f"({cluster_column} = %s AND {column} = %s)")
                params.extend((c, ns))
        return (f"({' OR '.join(parts)})", params) if parts else ("1 = 0", [])

    def text(self) -> str:
        """A stable text naming the pairs (for cache keys): `namespace` or `cluster/namespace`, sorted."""
        return ",".join(grant_text(c, ns) for c, ns in sorted(self.pairs))


def parse_grant(text: str) -> tuple[str, str]:
    """(cluster, namespace) of a grant written `cluster/namespace`, `namespace` (every cluster) or `cluster/`
    (the cluster scope of one cluster)."""
    cluster, sep, namespace = text.partition("/")
    return (cluster, namespace) if sep else (EVERY_CLUSTER, text)


def grant_text(cluster: str, namespace: str) -> str:
    """A grant as written: `namespace` (every cluster) or `cluster/namespace`."""
    return f"{cluster}/{namespace}" if cluster else namespace


def scope_allows(limit: frozenset[str] | None, cluster: str, namespace: str) -> bool:
    """Whether a caller limited to `limit` (None: not limited; a Scope, or a plain set of namespaces of every
    cluster) may see an object in `cluster` and `namespace`."""
    if limit is None:
        return True
    if isinstance(limit, Scope):
        return limit.allows(cluster, namespace)
    return namespace in limit


def scope_q(limit: Iterable[str] | None, column: str = "namespace") -> Q:
    """The Q of a limit on the namespace `column` (None: no limit; a Scope: by cluster and namespace; a plain
    set: by namespace in every cluster; empty: nothing)."""
    if limit is None:
        return Q()
    if isinstance(limit, Scope):
        return limit.q(column)
    allowed = sorted(set(limit))
    return Q(**{f"{column}__in": allowed}) if allowed else Q(pk__in=[])
