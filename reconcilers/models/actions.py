"""The action record: `ActionRecord` (append-only, one global hash chain: one row per action asked of the API,
the console, a management command or the admission webhook, allowed or refused) and its `Outcome`.

It lives with the other chained tables so that the engine (`reconcilers.engine.audit`, `checkpoint`,
`annotation_requests`) reads and writes it without importing the web project. The table keeps the name it was
created with, `accounts_actionrecord` (the accounts app's migrations 0001–0007 built it; reconcilers 0014 and
accounts 0008 moved it here in Django's state only). `opsconsole.accounts.models` re-exports both names.
"""

from __future__ import annotations

from typing import Any

from django.db import models, router, transaction
from django.db.models import Q
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from reconcilers.models.base import AppendOnlyModel
from reconcilers.models.chain import action_hash
from reconcilers.models.clusters import cluster_field


class Outcome(models.TextChoices):
    """How an action ended: done, refused (401/403/429), rejected as invalid (400/404/409) or failed (5xx)."""

    ALLOWED = "allowed"
    REFUSED = "refused"
    REJECTED = "rejected"
    FAILED = "failed"


class ActionRecord(AppendOnlyModel):
    """One action asked of the API: who (user, how authenticated), what (action, target), why (reason),
    and the outcome with its HTTP status. Append-only like the transition log, and one global hash chain
    (accounts migration 0005): `seq` counts 1, 2, 3…, `prev_hash` is the previous record's `hash` and `hash` covers
    this record's fields (`reconcilers.models.chain.ACTION_HASHED_FIELDS`) and `prev_hash`. Inserts are serialised
    (a transaction-scoped advisory lock on PostgreSQL; SQLite's writes are serial already);
    `reconcilers.engine.audit.actions_verify` checks the chain."""

    created_at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=150, blank=True, help_text="the username, '' when unauthenticated")
    auth = models.CharField(max_length=16, blank=True, help_text="session, token or '' (none)")
    token_prefix = models.CharField(max_length=16, blank=True)
    action = models.CharField(max_length=64, help_text="e.g. resource.reconcile, queue.retry_now, token.create")
    cluster = cluster_field()
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=1024)
    target = models.CharField(max_length=1024, blank=True)
    reason = models.TextField(blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    status_code = models.PositiveSmallIntegerField()
    detail = models.JSONField(default=dict, blank=True)
    remote_addr = models.CharField(max_length=64, blank=True)
    seq = models.PositiveBigIntegerField(unique=True, help_text="the record's place in the chain: 1, 2, 3…")
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)

    class Meta:
        db_table = "accounts_actionrecord"  # the table the accounts app created: moved in Django's state only
        base_manager_name = "objects"
        indexes = [
            models.Index(fields=["created_at"], name="actionrecord_created"),
            models.Index(fields=["actor", "created_at"], name="actionrecord_actor_created"),
            models.Index(fields=["outcome", "created_at"], name="actionrecord_outcome_created"),
            # the admission recorder's "already on record?" (detail__uid with the action): one index probe, not a
            # scan of every record's JSON (accounts migration 0006)
            models.Index(KeyTransform("uid", "detail"), "action", name="actionrecord_detail_uid"),
            # a resource page's admission decisions (target `Kind namespace/name`, newest first): only admission
            # records, whose targets are Kubernetes names (ASCII, well under a B-tree entry's limit) (0007)
            models.Index(fields=["target", "-seq"], name="actionrecord_admission_target",
                         condition=Q(action__startswith="admission.")),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Insert the record at the end of the chain (refused for a stored row, as for every append-only row)."""
        if not self._state.adding:
            super().save(*args, **kwargs)  # refused
            return
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        with transaction.atomic(using=using):
            connection = transaction.get_connection(using)
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext('opsconsole.actionrecord.chain'))")
            last = type(self).objects.using(using).order_by("-seq").values_list("seq", "hash").first()
            self.seq, self.prev_hash = (last[0] + 1, last[1]) if last else (1, "")
            self.hash = action_hash(self, self.prev_hash)
            super().save(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.actor or '(anonymous)'} {self.action} {self.target}: {self.outcome} ({self.status_code})"
