"""Which kinds a controller's reconcilers reconcile (their primary kinds), which kinds they own, and by whom.

Built once from the reconcilers (`KindMap.of`); the informers, the event routing, the sweeps and the workqueue
gauges read it. A kind is named by its `KindId`, `(group, plural)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconcilers.core.reconciler import Reconciler, ResourceKind

KindId = tuple[str, str]  # (group, plural)


def kind_id(kind: ResourceKind) -> KindId:
    """The `(group, plural)` a kind is known by."""
    return (kind.group, kind.plural)


@dataclass
class KindMap:
    """The reconciled kinds (`primary`), who reconciles each (`reconciler_of`, `controller_names`), the owners of
    each owned kind (`owners_of`) and every kind watched (`kinds`: reconciled and owned)."""

    reconcilers: list[Reconciler] = field(default_factory=list)
    primary: dict[KindId, ResourceKind] = field(default_factory=dict)
    reconciler_of: dict[KindId, Reconciler] = field(default_factory=dict)
    controller_names: dict[KindId, str] = field(default_factory=dict)
    owners_of: dict[KindId, list[ResourceKind]] = field(default_factory=dict)
    kinds: dict[KindId, ResourceKind] = field(default_factory=dict)

    @classmethod
    def of(cls, reconcilers: Sequence[Reconciler]) -> KindMap:
        """The map of `reconcilers` (their resource, and the kinds they own)."""
        kinds = cls(reconcilers=list(reconcilers))
        for rec in kinds.reconcilers:
            kid = kind_id(rec.resource)
            kinds.reconciler_of[kid] = rec
            kinds.controller_names[kid] = rec.name
            kinds.primary[kid] = rec.resource
            kinds.kinds.setdefault(kid, rec.resource)
            for child in rec.owns:
                owners = kinds.owners_of.setdefault(kind_id(child), [])
                if rec.resource not in owners:
                    owners.append(rec.resource)
                kinds.kinds.setdefault(kind_id(child), child)
        return kinds
