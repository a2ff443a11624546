"""The audit trail: `Transition` and `SpecRevision` (append-only, one hash chain per resource) and `Anomaly`
(refused changes, and phases written by someone other than the engine).

Rows are written by `reconcilers.engine.recording` only; the hash is computed by `reconcilers.engine.audit`
(no logic lives in `save()`).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from reconcilers.models.base import AppendOnlyModel
from reconcilers.models.clusters import cluster_field


class Transition(AppendOnlyModel):
    """One recorded phase change of one resource. `seq` counts 1, 2, 3… per resource; `prev_hash` is the
    previous row's `hash` ('' for seq 1) and `hash` covers this row's fields and `prev_hash`."""

    resource = models.ForeignKey("reconcilers.Resource", on_delete=models.PROTECT, related_name="transitions")
    resource_uid = models.CharField(max_length=64)
    cluster = cluster_field()
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    seq = models.PositiveIntegerField()
    from_phase = models.CharField(max_length=63, blank=True)
    to_phase = models.CharField(max_length=63)
    reason = models.CharField(max_length=255, blank=True)
    message = models.TextField(blank=True)
    generation = models.BigIntegerField(default=0)
    resource_version = models.CharField(max_length=64, blank=True)
    actor = models.CharField(max_length=255, default="controller",
                             help_text="'controller', 'user:<name>', 'rollback:auto' / 'rollback:user:<name>' "
                                       "while a rollback is being verified, or who deleted the object: "
                                       "'kube:<user>' (admission) or 'unknown' (reconcilers.core.actors)")
    run = models.ForeignKey(
        "reconcilers.ReconcileRun", on_delete=models.PROTECT, null=True, blank=True, related_name="transitions"
    )
    trace_id = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)
    hash_version = models.PositiveSmallIntegerField(
        default=3, db_default=2,
        help_text="the hash format (reconcilers.engine.audit): 1 before migration 0007, 2 before 0021")

    class Meta:
        base_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(fields=["resource_uid", "seq"], name="transition_uid_seq_unique"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="transition_seq_positive"),
            models.CheckConstraint(
                condition=Q(actor="controller") | Q(actor="unknown") | Q(actor__startswith="user:")
                | Q(actor__startswith="rollback:") | Q(actor__startswith="kube:"),
                name="transition_actor_valid_v3",
            ),
        ]
        indexes = [
            models.Index(fields=["created_at"], name="transition_created_at"),
            models.Index(fields=["kind", "to_phase"], name="transition_kind_to"),
            # The console's overview (reconcilers.services.selectors.stats): edge counts over the last hour and
            # day read from the index alone; the newest departures from a state; their entering transitions. The
            # cluster is included so that a read limited by cluster (a grant, the console's picker) is one too.
            models.Index(fields=["created_at"], include=["kind", "from_phase", "to_phase", "namespace", "cluster"],
                         name="transition_created_edges"),
            models.Index(fields=["kind", "from_phase", "created_at"],
                         include=["resource", "seq", "namespace", "cluster"], name="transition_kind_from_created"),
            models.Index(fields=["resource", "seq"], include=["created_at"], name="transition_resource_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} #{self.seq}: {self.from_phase or '(none)'} -> {self.to_phase}"


class AnomalyCategory(models.TextChoices):
    """What an anomaly is about."""

    REFUSED = "refused"  # the kind's state machine refused a phase change the reconciler concluded
    OUT_OF_BAND = "out_of_band"  # a status phase the engine did not write (whatever field manager it names)
    LOOP = "loop"  # the same trigger re-enqueued the same key more often than the kind allows in a minute


class Anomaly(AppendOnlyModel):
    """A phase change the kind's state machine refused (one row per (resource, from, to, generation): a
    repeated run asking for the same refused change at the same generation does not add another), or an
    out-of-band status change: a phase the engine cannot prove it wrote (`actor` `kube:<user>` when admission
    established who, else the field manager's claim `manager:<name>`; what was written and when in `observed`),
    never recorded as a transition nor built on."""

    resource = models.ForeignKey("reconcilers.Resource", on_delete=models.PROTECT, related_name="anomalies")
    cluster = cluster_field()
    from_phase = models.CharField(max_length=63, blank=True)
    to_phase = models.CharField(max_length=63)
    reason = models.CharField(max_length=255, blank=True)
    message = models.TextField(blank=True)
    detail = models.TextField(blank=True, help_text="why it was refused")
    generation = models.BigIntegerField(default=0)
    actor = models.CharField(max_length=255, default="controller")
    run = models.ForeignKey(
        "reconcilers.ReconcileRun", on_delete=models.PROTECT, null=True, blank=True, related_name="anomalies"
    )
    created_at = models.DateTimeField(default=timezone.now)
    category = models.CharField(max_length=16, choices=AnomalyCategory.choices, default=AnomalyCategory.REFUSED)
    observed = models.JSONField(default=dict, blank=True,
                                help_text="out of band: the status written and its managedFields entry")

    class Meta:
        base_manager_name = "objects"
        verbose_name_plural = "anomalies"
        constraints = [
            models.UniqueConstraint(
                fields=["resource", "from_phase", "to_phase", "generation"], name="anomaly_once_per_generation",
                condition=Q(category="refused"),
            ),
        ]
        indexes = [models.Index(fields=["created_at"], name="anomaly_created_at")]

    def __str__(self) -> str:
        what = "out of band" if self.category == AnomalyCategory.OUT_OF_BAND else "refused"
        return f"{what} {self.from_phase or '(none)'} -> {self.to_phase} ({self.resource_id})"


class SpecRevision(AppendOnlyModel):
    """One generation of a resource's spec as the engine first saw it: the spec, its diff from the previous
    revision, and who changed it as Kubernetes tells it (the managedFields entries owning the changed fields).

    Revisions are links of the resource's hash chain, between its transitions: `seq` counts revisions 1, 2, 3…
    per resource, `chain_after` is the transition seq the revision follows (0: before the first), `prev_hash`
    is the hash of the chain's previous link (a transition or a revision) and `hash` covers this row's fields
    and `prev_hash` (see `reconcilers.engine.audit`)."""

    resource = models.ForeignKey("reconcilers.Resource", on_delete=models.PROTECT, related_name="revisions")
    resource_uid = models.CharField(max_length=64)
    cluster = cluster_field()
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    seq = models.PositiveIntegerField()
    chain_after = models.PositiveIntegerField(default=0, help_text="the transition seq this revision follows")
    generation = models.BigIntegerField()
    resource_version = models.CharField(max_length=64, blank=True)
    spec = models.JSONField(default=dict, blank=True)
    diff = models.JSONField(default=list, blank=True,
                            help_text="[{path, op, old, new}] from the previous revision (all of it for the first)")
    actor = models.CharField(max_length=255, blank=True,
                             help_text="'rollback:<who>' (the rollback's own write), 'kube:<user>' (admission) "
                                       "or 'manager:<field manager>' (a claim) of the newest entry owning a "
                                       "changed field")
    operation = models.CharField(max_length=32, blank=True, help_text="that entry's operation (Update, Apply)")
    managers = models.JSONField(default=list, blank=True,
                                help_text="every managedFields entry owning a changed field, newest first")
    changed_at = models.DateTimeField(null=True, blank=True, help_text="that entry's time")
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)
    hash_version = models.PositiveSmallIntegerField(
        default=3, db_default=2,
        help_text="the hash format (reconcilers.engine.audit): 1 before migration 0007, 2 before 0021")

    class Meta:
        base_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(fields=["resource_uid", "seq"], name="specrevision_uid_seq_unique"),
            models.UniqueConstraint(fields=["resource_uid", "generation"], name="specrevision_uid_generation_unique"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="specrevision_seq_positive"),
        ]
        indexes = [models.Index(fields=["resource", "generation"], name="specrevision_resource_gen")]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} generation {self.generation} by {self.actor or '?'}"
