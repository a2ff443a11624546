"""The accounts tables: `ApiToken` (stored as a sha256 hash, shown once) and `NamespaceGrant` (limits a user to
namespaces, in one cluster or every one).

`ActionRecord` (append-only: one row per action asked of the API, allowed or refused) and its `Outcome` live with
the other chained tables in `reconcilers.models.actions` (table `accounts_actionrecord`, unchanged); they are
re-exported here for the code that imports them from the accounts app.

No logic lives here: `opsconsole.accounts.tokens` creates, checks and revokes tokens and
`opsconsole.accounts.action_records` writes and reads the action record.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from reconcilers.models.actions import ActionRecord, Outcome

__all__ = ["ActionRecord", "ApiToken", "NamespaceGrant", "Outcome"]


class ApiToken(models.Model):
    """A per-user API token for scripts. Only its sha256 is stored; `prefix` identifies it in listings. It may
    expire (`expires_at`) and be limited to a role below its user's (`role`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="what the token is for (e.g. 'ci-pipeline')")
    description = models.TextField(blank=True, max_length=1000, help_text="more about its use, for whoever finds it")
    role = models.CharField(
        max_length=16, blank=True, choices=[(r, r) for r in ("viewer", "operator", "admin")],
        help_text="the most the token may do (never more than its user's role); '' = the user's role",
    )
    prefix = models.CharField(max_length=16, help_text="the token's first characters, for recognising it")
    hash = models.CharField(max_length=64, unique=True, help_text="sha256 hex of the token")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "created_at"], name="apitoken_user_created")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user_id}: {self.name})"


class NamespaceGrant(models.Model):
    """The user may see and act on objects in `namespace` ('' is the cluster scope) of `cluster` ('' every
    cluster) only. A user with no grant at all is not limited; a user with grants sees only those
    (cluster, namespace) pairs."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="namespace_grants")
    cluster = models.CharField(max_length=63, blank=True, default="", db_default="",
                               help_text="the cluster the grant is in; '' = every cluster")
    namespace = models.CharField(max_length=63, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "cluster", "namespace"],
                                               name="namespacegrant_cluster_unique")]

    def __str__(self) -> str:
        where = f"{self.cluster}/" if self.cluster else ""
        return f"{self.user_id} → {where}{self.namespace or '(cluster scope)'}"
