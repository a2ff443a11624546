"""Maintained aggregates for the console's overview and the metrics summary, so that their counts do not scan
the mirror or the audit trail: resources per (cluster, kind, group, namespace, phase, deleted) and transitions per
hour bucket and (cluster, kind, namespace, from, to).

Database triggers (migration `0015_maintained_counts`; the cluster added by `0024_counts_by_cluster`) keep them in
the same transaction as the write that changes them, whichever code path writes: a trigger only appends a ±1 row to
a `*Delta` table (no lock on a shared counter row, so concurrent writers neither wait on nor deadlock with each
other), and a reader folds the deltas into the totals (`reconcilers.services.selectors.aggregates.fold`) and adds
whatever it could not fold. Reads sum totals and deltas; the figures equal a recount (`aggregates.recount`) at
every committed state.
"""

from __future__ import annotations

from django.db import models

from reconcilers.models.clusters import cluster_field

#: the width of a transition count bucket (the triggers truncate `created_at` to the hour, UTC)
BUCKET_SECONDS = 3600


class _ResourceKey(models.Model):
    cluster = cluster_field()
    kind = models.CharField(max_length=63)
    group = models.CharField(max_length=253, blank=True)
    namespace = models.CharField(max_length=63, blank=True)
    phase = models.CharField(max_length=63, blank=True)
    deleted = models.BooleanField(default=False)
    n = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class ResourceCount(_ResourceKey):
    """Resources (mirror rows) per cluster, kind, group, namespace, phase and deleted flag: the folded total."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "kind", "group", "namespace", "phase",
                                                       "deleted"], name="resourcecount_cluster_key")]


class ResourceCountDelta(_ResourceKey):
    """+1 / -1 per mirror row inserted, deleted or moved to another key, appended by the triggers, not yet folded
    into `ResourceCount`."""


class _TransitionKey(models.Model):
    bucket = models.DateTimeField(help_text="the hour (UTC) the transitions were recorded in")
    cluster = cluster_field()
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    from_phase = models.CharField(max_length=63, blank=True)
    to_phase = models.CharField(max_length=63)
    n = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class TransitionCount(_TransitionKey):
    """Transitions per hour bucket, cluster, kind, namespace and edge: the folded total."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["bucket", "cluster", "kind", "namespace", "from_phase",
                                                       "to_phase"], name="transitioncount_cluster_key")]


class TransitionCountDelta(_TransitionKey):
    """+1 per transition recorded, appended by the trigger, not yet folded into `TransitionCount`."""
