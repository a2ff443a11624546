"""Django app configuration for the console."""

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The console's pages."""

    name = "opsconsole.console"
    label = "console"
