"""WSGI entry point for the web process (gunicorn opsconsole.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

application = get_wsgi_application()
