"""`Resource`: the database mirror of one Kubernetes object that a reconciler owns.

The controller keeps its metadata, spec, labels and owner current (`resource_mirror_upsert`); the recording
of a reconcile owns `phase`, `phase_since`, `reason`, `message` and the head of the object's transition chain
(`last_transition_seq`, `last_transition_hash`), which it changes only with the row locked, in the same
transaction as the Transition it appends.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import models
from django.db.models.functions import Coalesce

from reconcilers.models.clusters import cluster_field

#: what the console's "time in phase" sort puts for a resource with no phase yet (its keyset cursor compares it)
PHASE_SINCE_UNSET = datetime(1970, 1, 1, tzinfo=UTC)


class Resource(models.Model):
    """One object (by uid) of a registered kind, as last seen by the controller or a reconcile."""

    uid = models.CharField(max_length=64, unique=True)
    cluster = cluster_field(db_index=True)
    key = models.CharField(max_length=1024, db_index=True, help_text="the workqueue key group/version/plural/ns/name")
    group = models.CharField(max_length=253, blank=True)
    version = models.CharField(max_length=63)
    plural = models.CharField(max_length=63)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True, help_text="'' for a cluster-scoped object")
    name = models.CharField(max_length=253)

    phase = models.CharField(max_length=63, blank=True, help_text="'' until the first recorded transition")
    phase_since = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=255, blank=True)
    message = models.TextField(blank=True)
    conditions = models.JSONField(default=list, blank=True)

    generation = models.BigIntegerField(default=0)
    observed_generation = models.BigIntegerField(null=True, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    owner = models.JSONField(null=True, blank=True, help_text="the controller ownerReference, if any")
    spec = models.JSONField(default=dict, blank=True)
    status = models.JSONField(default=dict, blank=True)

    deleted = models.BooleanField(default=False)
    deleted_at = models.DateTimeField(null=True, blank=True)
    last_reconcile_at = models.DateTimeField(null=True, blank=True)
    last_result = models.CharField(max_length=16, blank=True)

    #: the head of the resource's hash chain: what audit_verify checks the chain's end against. The chain holds
    #: the transitions (`last_transition_seq` of them) and the spec revisions (`last_revision_seq`);
    #: `last_transition_hash` is the hash of its newest link, a transition or a revision
    last_transition_seq = models.PositiveIntegerField(default=0)
    last_transition_hash = models.CharField(max_length=64, blank=True)
    last_revision_seq = models.PositiveIntegerField(default=0)
    #: healing records in the chain (`HealingRecord`); kept with the row locked, like the other counts
    last_healing_seq = models.PositiveIntegerField(default=0)

    #: self-healing's current state, changed with the row locked in the same transaction as the healing record
    #: that says why (`reconcilers.engine.healing`): the anomaly rules matching now ({rule: {since, record,
    #: message}}), the suspension ({actor, reason, at, until}), the rollback in progress or last concluded
    #: ({state, actor, from_generation, to_generation, generation, started_at, deadline, record}) and the
    #: generation a person pinned (automatic rollback never restores an older one)
    active_anomalies = models.JSONField(default=dict, blank=True)
    suspended = models.BooleanField(default=False)
    suspension = models.JSONField(null=True, blank=True)
    rollback = models.JSONField(null=True, blank=True)
    pinned_generation = models.BigIntegerField(null=True, blank=True)
    #: anomalies a person resolved, {rule: {generation, record}}: a rule resolved for a generation is not raised
    #: again for that generation
    anomalies_resolved = models.JSONField(default=dict, blank=True)
    #: the object's `opsconsole.io/auto-rollback` annotation (True / False; None when it does not set one), kept by
    #: the mirror
    auto_rollback = models.BooleanField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["kind", "namespace", "phase"], name="resource_kind_ns_phase"),
            models.Index(fields=["phase_since"], name="resource_phase_since"),
            models.Index(fields=["group", "plural", "namespace", "name"], name="resource_gpnn"),
            # The console's overview: live resources per kind and phase, read from the index alone.
            models.Index(fields=["kind", "phase", "namespace"], condition=models.Q(deleted=False),
                         name="resource_live_kind_phase"),
            # self-healing's evaluator and the overview: the few live resources with something to heal
            models.Index(fields=["kind"], condition=models.Q(deleted=False) & (
                ~models.Q(active_anomalies={}) | models.Q(suspended=True) | models.Q(rollback__isnull=False)),
                name="resource_live_healing"),
            # The console's resources table, ordered (sort, id) and paged by a row comparison on it: a first or a
            # deep page is a short index range scan, not a sort of the whole mirror (issue 40). No index on
            # last_reconcile_at: every run sets it, and an index on it would cost each run's update its HOT path.
            models.Index(fields=["name", "id"], name="resource_name_id"),
            models.Index(fields=["namespace", "id"], name="resource_namespace_id"),
            models.Index(fields=["kind", "id"], name="resource_kind_id"),
            models.Index(fields=["phase", "id"], name="resource_phase_id"),
            models.Index(Coalesce("phase_since", models.Value(PHASE_SINCE_UNSET)), models.F("id"),
                         name="resource_since_id"),
            # The overview's time in the current phase: the oldest and the middle entry of each live (kind,
            # phase), found by position in this index, the count coming from the maintained counts (the cluster
            # included for a read limited by cluster).
            models.Index(fields=["kind", "phase", "phase_since"], include=["namespace", "cluster"],
                         condition=models.Q(deleted=False), name="resource_live_phase_since"),
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"
