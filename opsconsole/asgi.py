"""ASGI entry point for the web process, for servers that speak ASGI."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

application = get_asgi_application()
