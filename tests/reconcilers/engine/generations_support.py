"""Helpers for the tests of evidence attributed to a generation (issue 38): a generation's spec revision at a
chosen time, as the recording writes one after the generation's first run applied its children."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from reconcilers.engine.audit import revision_fields, revision_hash
from reconcilers.models import Resource, SpecRevision


def revision_at(uid: str, generation: int, at: datetime, spec: dict | None = None) -> SpecRevision:
    """Append generation `generation`'s revision of resource `uid`, created at `at`."""
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=uid)
        rev = SpecRevision(resource=row, resource_uid=uid, kind=row.kind, namespace=row.namespace, name=row.name,
                           seq=row.last_revision_seq + 1, chain_after=row.last_transition_seq, generation=generation,
                           spec=spec or {"size": generation}, created_at=at, prev_hash=row.last_transition_hash)
        rev.hash = revision_hash(revision_fields(rev), rev.prev_hash)
        rev.save(force_insert=True)
        row.last_revision_seq, row.last_transition_hash = rev.seq, rev.hash
        row.save()
    return rev
