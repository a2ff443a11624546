"""Django app configuration for accounts (tokens, namespace grants, the action record)."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """API tokens, namespace grants, roles and the action record."""

    name = "opsconsole.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from opsconsole.accounts import logins  # noqa: F401 - connects the failed-login and lockout records
        from opsconsole.accounts.roles import ensure_role_groups

        post_migrate.connect(ensure_role_groups, sender=self, dispatch_uid="opsconsole-accounts-roles")
