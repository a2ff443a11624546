"""Django app configuration for the reconcile engine (its models and management commands)."""

from django.apps import AppConfig


class ReconcilersConfig(AppConfig):
    """The engine's Django side: models, admin, management commands."""

    name = "reconcilers"
    label = "reconcilers"
    verbose_name = "Reconcilers"

    def ready(self) -> None:
        """Create the Celery app as Django starts, so that tasks sent from any process (web, controller, a
        management command, the tests) go to it rather than to Celery's default app."""
        import opsconsole.celery  # noqa: F401
