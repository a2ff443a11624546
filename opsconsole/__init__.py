"""The opsconsole Django project: settings, URLs, the Celery app and the web apps (console, api).

The Celery app (`opsconsole.celery.app`, also `opsconsole.celery_app`) is imported when Django starts
(`opsconsole.apps`), not when this package is: importing `opsconsole.testing`, the pytest plugin a kind author
gets by installing opsconsole, must not set DJANGO_SETTINGS_MODULE in the author's test process.
"""

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from opsconsole.celery import app

        return app
    raise AttributeError(f"module 'opsconsole' has no attribute {name!r}")
