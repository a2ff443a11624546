"""Django app configuration for the reconcile engine (its models and management commands).

The Celery app is the project's: `opsconsole.apps` creates it as Django starts, and the engine reaches it as
`celery.current_app`.
"""

from django.apps import AppConfig


class ReconcilersConfig(AppConfig):
    """The engine's Django side: models, admin, management commands."""

    name = "reconcilers"
    label = "reconcilers"
    verbose_name = "Reconcilers"
