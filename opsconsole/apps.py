"""The project's own Django app: it creates the Celery app as Django starts.

Tasks sent from any process (web, controller, a management command, the tests) then go to `opsconsole.celery.app`
rather than to Celery's fallback app; the engine reaches it as `celery.current_app` and never imports
`opsconsole.celery` (an import-linter contract in pyproject.toml keeps it so).
"""

from django.apps import AppConfig


class OpsconsoleConfig(AppConfig):
    """Process bootstrap only: no models, no URLs."""

    name = "opsconsole"
    label = "opsconsole"
    verbose_name = "opsconsole"

    def ready(self) -> None:
        """Create the Celery app (importing `opsconsole.celery` makes it the current and default app)."""
        import opsconsole.celery  # noqa: F401
