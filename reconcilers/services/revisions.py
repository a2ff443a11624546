"""Spec revisions of a resource (read-only): the list, newest first, and the diff between any two generations;
and the out-of-band status changes (a phase another field manager wrote), newest first.

Revisions are recorded by the engine (`recording.revision_record`) once per generation, with the managedFields
manager(s) of the changed fields as actor; the diff between two is computed here from their stored specs
(`meta.spec_diff`), the same way as each revision's diff from its predecessor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from reconcilers.core.meta import spec_diff
from reconcilers.models import Anomaly, AnomalyCategory, Resource, SpecRevision


def resource_revisions(resource: Resource) -> QuerySet[SpecRevision]:
    """The resource's spec revisions, newest first."""
    return SpecRevision.objects.filter(resource=resource).order_by("-seq")


@dataclass
class RevisionCompare:
    """Two revisions of one resource and what changed from the first to the second."""

    older: SpecRevision
    newer: SpecRevision
    changes: list[dict[str, Any]]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The changes with their values as JSON text, for a table (`old_text` / `new_text`, '' when absent)."""
        def text(value: Any, present: bool) -> str:
            return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) if present else ""

        return [{**c, "old_text": text(c["old"], c["op"] != "add"), "new_text": text(c["new"], c["op"] != "remove")}
                for c in self.changes]


def revision_compare(resource: Resource, from_generation: Any, to_generation: Any) -> RevisionCompare | None:
    """The diff between the revisions of two generations of `resource` (either order); None when either is not
    on record or a generation is not a number."""
    try:
        wanted = {int(from_generation), int(to_generation)}
    except (TypeError, ValueError):
        return None
    rows = {r.generation: r for r in SpecRevision.objects.filter(resource=resource, generation__in=wanted)}
    if len(rows) != len(wanted):
        return None
    first, second = rows[int(from_generation)], rows[int(to_generation)]
    return RevisionCompare(first, second, spec_diff(first.spec, second.spec))


def revision_compare_default(resource: Resource) -> RevisionCompare | None:
    """The newest revision against the one before it (None with fewer than two)."""
    newest = list(resource_revisions(resource)[:2])
    if len(newest) < 2:
        return None
    return RevisionCompare(newest[1], newest[0], spec_diff(newest[1].spec, newest[0].spec))


def resource_out_of_band(resource: Resource, limit: int = 20) -> list[Anomaly]:
    """The resource's out-of-band status changes (phases written by another field manager than the engine,
    never recorded as transitions), newest first."""
    return list(Anomaly.objects.filter(resource=resource, category=AnomalyCategory.OUT_OF_BAND)
                .order_by("-created_at", "-id")[:limit])
