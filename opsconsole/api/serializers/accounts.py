"""The serializers of the caller's account: API tokens (the list's filters, a token's input, a token as listed and
just issued), who the caller is, and the action record (its filters and one audited action)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from opsconsole.accounts.models import ApiToken
from reconcilers.models import ActionRecord


class TokenQuerySerializer(serializers.Serializer):
    """Admins may list everyone's tokens (`all`) or one user's (`username`)."""

    all = serializers.BooleanField(required=False, default=False)
    username = serializers.CharField(required=False, max_length=150)


class TokenCreateInputSerializer(serializers.Serializer):
    """POST tokens."""

    name = serializers.CharField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True, max_length=1000, default="")
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=3650, allow_null=True,
                                               help_text="none or null: the token does not expire")
    role = serializers.ChoiceField(required=False, allow_blank=True, default="",
                                   choices=["viewer", "operator", "admin"],
                                   help_text="limit the token to this role (at most the user's own)")
    username = serializers.CharField(required=False, max_length=150, help_text="admins: create it for this user")


class TokenSerializer(serializers.ModelSerializer):
    """A token as listed (never its secret)."""

    username = serializers.CharField(source="user.username", read_only=True)
    active = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "username", "name", "description", "role", "prefix", "created_at", "expires_at",
                  "last_used_at", "revoked_at", "active"]

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_active(self, obj: ApiToken) -> bool:
        return obj.revoked_at is None and (obj.expires_at is None or obj.expires_at > timezone.now())


class IssuedTokenSerializer(TokenSerializer):
    """A token just created: `token` is shown this once."""

    token = serializers.CharField(read_only=True)

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class MeSerializer(serializers.Serializer):
    """Who the caller is: role and namespace limit."""

    username = serializers.CharField()
    role = serializers.CharField(allow_null=True)
    namespaces = serializers.ListField(
        child=serializers.CharField(allow_blank=True), allow_null=True,
        help_text="the grants: `namespace` (of every cluster) or `cluster/namespace`; '' the cluster scope; "
                  "null: not limited")
    auth = serializers.CharField()


class ActionQuerySerializer(serializers.Serializer):
    """Filters of the action record."""

    actor = serializers.CharField(required=False, max_length=150)
    action = serializers.CharField(required=False, max_length=64)
    outcome = serializers.ChoiceField(required=False, choices=["allowed", "refused", "rejected", "failed"])
    target = serializers.CharField(required=False, max_length=512,
                                   help_text="a prefix of the target; an object is named by its key, "
                                             "`cache.example.com/v1alpha1/memcacheds/team-a/cache` (every action "
                                             "about it: reconciles, suspensions, admission decisions, created or "
                                             "not), `cache.example.com/v1alpha1/memcacheds/team-a/` (every one in "
                                             "team-a); the `Memcached team-a/cache` form of older admission "
                                             "decisions finds the same records")


class ActionRecordSerializer(serializers.ModelSerializer):
    """One audited action."""

    class Meta:
        model = ActionRecord
        fields = ["id", "created_at", "cluster", "actor", "auth", "token_prefix", "action", "method", "path", "target",
                  "reason", "outcome", "status_code", "detail", "remote_addr"]
