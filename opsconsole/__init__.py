"""The opsconsole Django project: settings, URLs, the Celery app and the web apps (console, api)."""

from opsconsole.celery import app as celery_app

__all__ = ["celery_app"]
