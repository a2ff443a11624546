"""Production settings: the shared settings with DEBUG off, secrets required and browsers held to HTTPS.

Use with DJANGO_SETTINGS_MODULE=opsconsole.settings_production. SECRET_KEY and DATABASE_URL must come
from the environment; nothing secret is read from a file in the image.
"""

import copy
import os

from django.core.exceptions import ImproperlyConfigured

from opsconsole.settings import *  # noqa: F403
from opsconsole.settings import LOGGING as _BASE_LOGGING
from opsconsole.settings import env_bool

DEBUG = False

if not os.environ.get("SECRET_KEY"):
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment for production")
SECRET_KEY = os.environ["SECRET_KEY"]
if not os.environ.get("DATABASE_URL"):
    raise ImproperlyConfigured("DATABASE_URL must be set in the environment for production")

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

WHITENOISE_USE_FINDERS = False
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# health and metrics endpoints answer over plain HTTP inside the cluster (kubelet probes, Prometheus scrapes)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

# JSON logs with trace ids unless LOG_FORMAT says otherwise
LOG_FORMAT = os.environ.get("LOG_FORMAT", "json")
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain, not {LOG_FORMAT!r}")
LOGGING = copy.deepcopy(_BASE_LOGGING)
LOGGING["handlers"]["console"]["formatter"] = LOG_FORMAT
