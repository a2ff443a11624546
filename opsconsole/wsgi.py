"""WSGI entry point for the web process (gunicorn opsconsole.wsgi).

Telemetry: tracing for service `opsconsole-web` (off with OPSCONSOLE_TRACING=off) with Django instrumented,
so a request's span is the root of what it causes (a manual reconcile's trace continues into the worker).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

application = get_wsgi_application()


def _tracing() -> None:
    from opsconsole.telemetry.tracing import django_instrument, tracing_setup

    if tracing_setup("opsconsole-web") is not None:
        django_instrument()


_tracing()
