"""Self-healing's record: the Kubernetes Events archive (`KubeEvent`) and the healing links of a resource's hash
chain (`HealingRecord`: anomalies detected and cleared, rollbacks started, verified or escalated, suspends and
resumes, pinned generations).

Both are append-only. Events expire from Kubernetes after an hour; their archive keeps one row per observed
occurrence (an Event's uid and its `count`), filed under the registered resource it is about (the object itself
or a descendant through ownerReferences). Retention may delete old archive rows (the one sanctioned delete,
`reconcilers.engine.retention`); healing records are links of the resource's chain and are never deleted.

Rows are written by `reconcilers.engine.healing` only; the hash is computed by `reconcilers.engine.audit`.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from reconcilers.models.base import AppendOnlyModel
from reconcilers.models.clusters import cluster_field


class KubeEvent(AppendOnlyModel):
    """One occurrence of a Kubernetes Event (core/v1) about an object of a registered kind or one of its
    descendants: a row per (Event uid, count). `resource` is the registered object it is filed under; the
    involved object may be that object or a descendant (a Deployment, its ReplicaSet, a Pod)."""

    resource = models.ForeignKey("reconcilers.Resource", on_delete=models.PROTECT, related_name="kube_events")
    cluster = cluster_field()
    event_uid = models.CharField(max_length=64)
    count = models.PositiveIntegerField(default=1)
    occurrences = models.PositiveIntegerField(default=1, help_text="how many times it happened since the count "
                                                                  "archived before (the rules sum these)")
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253, help_text="the Event object's name")
    type = models.CharField(max_length=16, blank=True, help_text="Normal or Warning")
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    involved_api_version = models.CharField(max_length=253, blank=True)
    involved_kind = models.CharField(max_length=63, blank=True)
    involved_namespace = models.CharField(max_length=63, blank=True)
    involved_name = models.CharField(max_length=253, blank=True)
    involved_uid = models.CharField(max_length=64, blank=True)
    source = models.CharField(max_length=253, blank=True, help_text="reportingComponent or source.component")
    first_timestamp = models.DateTimeField(null=True, blank=True)
    last_timestamp = models.DateTimeField(null=True, blank=True, help_text="when this occurrence happened")
    observed_at = models.DateTimeField(default=timezone.now, help_text="when the controller archived it")
    generation = models.BigIntegerField(null=True, blank=True,
                                        help_text="the generation of the registered object that produced it "
                                                  "(None: unattributed, never evidence against a generation)")
    attribution = models.CharField(max_length=32, blank=True,
                                   help_text="how the generation was established (e.g. 'self', 'replicaset')")

    class Meta:
        base_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(fields=["event_uid", "count"], name="kubeevent_uid_count_unique"),
        ]
        indexes = [
            models.Index(fields=["resource", "last_timestamp"], name="kubeevent_resource_last"),
            models.Index(fields=["last_timestamp"], include=["resource", "type", "reason"],
                         name="kubeevent_last_reason"),
            models.Index(fields=["observed_at"], name="kubeevent_observed_at"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.reason} on {self.involved_kind} {self.involved_name} (#{self.count})"


class HealingAction(models.TextChoices):
    """What a healing record says happened."""

    ANOMALY_DETECTED = "anomaly.detected"
    ANOMALY_CLEARED = "anomaly.cleared"
    ROLLBACK_STARTED = "rollback.started"  # the spec of an earlier generation was written back
    ROLLBACK_SUCCEEDED = "rollback.succeeded"  # the restored generation reached a ready phase
    ROLLBACK_FAILED = "rollback.failed"  # it did not: escalated to a person
    ROLLBACK_REFUSED = "rollback.refused"  # a rollback was due and not done (twice in a row, pinned, none good)
    SUSPENDED = "suspended"
    RESUMED = "resumed"
    SUSPENSION_REFUSED = "suspension.refused"  # a suspension annotation not honoured (a bad suspended-until)
    PINNED = "pinned"
    UNPINNED = "unpinned"
    ROLLBACK_APPLIED = "rollback.applied"  # the restored spec was written (the write that `rollback.started` announced)
    ROLLBACK_DEFERRED = "rollback.deferred"  # a re-apply of a rolled-back spec inside its back-off: not rolled back
    ROLLBACK_SUPERSEDED = "rollback.superseded"  # a later generation ended a rollback's verification or deferral
    ANOMALY_ACKNOWLEDGED = "anomaly.acknowledged"  # a person took note of an anomaly that needs one
    ANOMALY_ASSIGNED = "anomaly.assigned"
    ANOMALY_RESOLVED = "anomaly.resolved"  # a person resolved it, with a note
    RULE_NOT_EVALUATED = "rule.not_evaluated"  # a rule could not be evaluated (Prometheus down, a query error)
    RULE_EVALUATED = "rule.evaluated"  # a rule not evaluated before is evaluated again


class HealingRecord(AppendOnlyModel):
    """One healing link of a resource's hash chain. Like a spec revision it sits between the transitions:
    `chain_after` is the transition seq it follows and `revision_after` the revision seq; `seq` counts healing
    records 1, 2, 3… per resource; `prev_hash` is the hash of the chain's previous link and `hash` covers this
    row's fields and `prev_hash` (`reconcilers.engine.audit`)."""

    resource = models.ForeignKey("reconcilers.Resource", on_delete=models.PROTECT, related_name="healing_records")
    resource_uid = models.CharField(max_length=64)
    cluster = cluster_field()
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    seq = models.PositiveIntegerField()
    chain_after = models.PositiveIntegerField(default=0, help_text="the transition seq this record follows")
    revision_after = models.PositiveIntegerField(default=0, help_text="the revision seq this record follows")
    action = models.CharField(max_length=32, choices=HealingAction.choices)
    rule = models.CharField(max_length=63, blank=True, help_text="the anomaly rule, for anomaly records")
    actor = models.CharField(max_length=255, help_text="'controller', 'user:<name>', 'manager:<field manager>', "
                                                       "'rollback:auto' or 'rollback:user:<name>'")
    reason = models.TextField(blank=True)
    message = models.TextField(blank=True)
    generation = models.BigIntegerField(default=0, help_text="the object's generation when it happened")
    target_generation = models.BigIntegerField(null=True, blank=True,
                                               help_text="rollback: the generation restored; pin: the one pinned")
    detail = models.JSONField(default=dict, blank=True, help_text="the evidence (events, counts, deadlines)")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="suspend: when it ends by itself")
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)
    hash_version = models.PositiveSmallIntegerField(
        default=3, db_default=2, help_text="the hash format (reconcilers.engine.audit): 2 before migration 0021")

    class Meta:
        base_manager_name = "objects"
        constraints = [
            models.UniqueConstraint(fields=["resource_uid", "seq"], name="healingrecord_uid_seq_unique"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="healingrecord_seq_positive"),
        ]
        indexes = [
            models.Index(fields=["resource", "seq"], name="healingrecord_resource_seq"),
            models.Index(fields=["created_at"], include=["kind", "action"], name="healingrecord_created"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} healing #{self.seq}: {self.action} by {self.actor}"


class NotificationDelivery(models.Model):
    """One notification of a healing record that needs a person (an escalation, an anomaly whose rule does not
    roll back) to one configured receiver (`OPSCONSOLE_NOTIFICATIONS`): its attempts, the last answer and whether it
    was delivered. Not a chain link: the record it is about is."""

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"  # gave up after the last retry

    record = models.ForeignKey(HealingRecord, on_delete=models.PROTECT, related_name="deliveries")
    receiver = models.CharField(max_length=63, help_text="the receiver's name in the settings")
    url = models.CharField(max_length=2048)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_status = models.IntegerField(null=True, blank=True, help_text="the receiver's HTTP status")
    last_error = models.TextField(blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["record", "receiver"], name="notification_record_receiver_unique"),
        ]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="notification_due"),
        ]

    def __str__(self) -> str:
        return f"notification of healing record {self.record_id} to {self.receiver}: {self.state}"
