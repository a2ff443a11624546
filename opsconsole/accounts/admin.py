"""Read-mostly admin pages for tokens, namespace grants and the (read-only) action record."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from opsconsole.accounts.models import ApiToken, NamespaceGrant
from reconcilers.models import ActionRecord


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens: listed and revocable by editing revoked_at; never created here (the secret is shown once)."""

    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "hash", "created_at", "last_used_at")

    def has_add_permission(self, request: Any) -> bool:
        return False


@admin.register(NamespaceGrant)
class NamespaceGrantAdmin(admin.ModelAdmin):
    """Limit users to namespaces (of one cluster, or of every cluster when `cluster` is blank)."""

    list_display = ("user", "cluster", "namespace", "created_at")


@admin.register(ActionRecord)
class ActionRecordAdmin(admin.ModelAdmin):
    """The action record, read-only."""

    list_display = ("created_at", "actor", "action", "target", "outcome", "status_code")
    list_filter = ("outcome", "action")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
