"""`ReconcileRun` (one append-only row per reconcile) and `ReconcileRequest` (a manual reconcile's lifecycle)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from reconcilers.models.base import AppendOnlyModel
from reconcilers.models.chain import request_identity_hash
from reconcilers.models.clusters import cluster_field


class RunResult(models.TextChoices):
    """Reconcile results, labelled as controller-runtime labels them."""

    SUCCESS = "success"
    ERROR = "error"
    REQUEUE = "requeue"
    REQUEUE_AFTER = "requeue_after"


class ReconcileRun(AppendOnlyModel):
    """One reconcile of one key: when, how long, how it ended, on which worker, in which trace."""

    key = models.CharField(max_length=1024)
    cluster = cluster_field()
    kind = models.CharField(max_length=63)
    resource = models.ForeignKey(
        "reconcilers.Resource", on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    started_at = models.DateTimeField()
    duration_seconds = models.FloatField()
    result = models.CharField(max_length=16, choices=RunResult.choices)
    error_class = models.CharField(max_length=255, blank=True)
    error_message = models.TextField(blank=True)
    attempt = models.PositiveIntegerField(default=1)
    worker = models.CharField(max_length=255, blank=True)
    trace_id = models.CharField(max_length=32, blank=True)
    request = models.ForeignKey(
        "reconcilers.ReconcileRequest", on_delete=models.PROTECT, null=True, blank=True, related_name="runs"
    )
    #: the operator version that executed the run (reconcilers.engine.versions): a new version's runs are its evidence
    operator_version = models.CharField(
        max_length=128, blank=True, default="",
        help_text="The operator version that executed the run: OPSCONSOLE_OPERATOR_VERSION (an image tag), else the "
                  "Python distribution providing the kind's code and its version.")
    #: why the run happened (reconcilers.engine.triggers): the coalesced triggers of its key, oldest first, bounded
    triggers = models.JSONField(
        default=list, blank=True,
        help_text="Why the run happened: the triggers coalesced on its key (watch events with the fields that "
                  "changed and their actor, resync, manual request, rollback, requeue), oldest first, bounded.")
    triggers_dropped = models.PositiveIntegerField(
        default=0, help_text="Triggers coalesced on the key beyond the bound: counted, not kept.")

    class Meta:
        base_manager_name = "objects"
        indexes = [
            models.Index(fields=["key", "started_at"], name="run_key_started"),
            models.Index(fields=["kind", "result", "started_at"], name="run_kind_result_started"),
            # the overview's run charts: a window's runs per bucket with their durations and results, read from
            # the index alone (after a burst of 100,000 runs, 455 -> 131 ms on PostgreSQL: no heap fetch)
            models.Index(fields=["started_at"], include=["duration_seconds", "result"], name="run_started_cover"),
        ]

    def __str__(self) -> str:
        return f"{self.key} @ {self.started_at:%Y-%m-%d %H:%M:%S}: {self.result}"


class RequestState(models.TextChoices):
    """The lifecycle of a manual reconcile request."""

    REQUESTED = "requested"
    PICKED_UP = "picked_up"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ReconcileRequest(models.Model):
    """A manual reconcile (Flux's requestedAt convention): who asked, why, and what came of it.

    Its lifecycle columns change (state, times, run, transition, trace, error, resource); its identity does not:
    `identity_hash` (set at insert) covers `chain.REQUEST_IDENTITY_FIELDS` (id, key, token, actor, reason,
    idempotency key, requested_at) and `audit_verify` checks it. On PostgreSQL a trigger refuses an UPDATE of
    those columns, DELETE and TRUNCATE (migration 0008); a deleted row is caught by the signed checkpoint's
    row count."""

    OPEN_STATES = (RequestState.REQUESTED, RequestState.PICKED_UP)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    resource = models.ForeignKey(
        "reconcilers.Resource", on_delete=models.PROTECT, null=True, blank=True, related_name="requests"
    )
    key = models.CharField(max_length=1024)
    cluster = cluster_field()
    token = models.CharField(max_length=128, help_text="the opsconsole.io/reconcile-requested-at value")
    actor = models.CharField(max_length=255)
    reason = models.TextField(blank=True)
    idempotency_key = models.CharField(max_length=255, blank=True)
    state = models.CharField(max_length=16, choices=RequestState.choices, default=RequestState.REQUESTED)
    requested_at = models.DateTimeField(default=timezone.now)
    picked_up_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    run = models.ForeignKey(
        "reconcilers.ReconcileRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    transition = models.ForeignKey(
        "reconcilers.Transition", on_delete=models.SET_NULL, null=True, blank=True, related_name="requests"
    )
    trace_id = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)
    identity_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the request's identity")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["actor", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="request_idempotency_per_actor",
            ),
        ]
        indexes = [
            models.Index(fields=["key", "state"], name="request_key_state"),
            models.Index(fields=["token"], name="request_token"),
            models.Index(fields=["requested_at"], name="request_requested_at"),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Hash the identity at insert."""
        if self._state.adding:
            self.identity_hash = request_identity_hash(self)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"reconcile {self.key} by {self.actor}: {self.state}"
