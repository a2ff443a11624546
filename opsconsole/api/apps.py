"""Django app configuration for the REST API."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API."""

    name = "opsconsole.api"
    label = "api"
