"""Django app configuration for the reconcile engine (its models and management commands)."""

from django.apps import AppConfig


class ReconcilersConfig(AppConfig):
    """The engine's Django side: models, admin, management commands."""

    name = "reconcilers"
    label = "reconcilers"
    verbose_name = "Reconcilers"
