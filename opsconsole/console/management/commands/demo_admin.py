"""`manage.py demo_admin`: make sure the embedded setup has a demo administrator, and print its login.

The password is generated once per installation and kept in the data folder, so a demo install never
ships a well-known password.
"""

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    """Create (or reset) the demo administrator and print its username and password."""

    help = "Create the demo administrator for the embedded setup and print its login."

    def add_arguments(self, parser: CommandParser) -> None:
        """--username picks the account name (default: admin)."""
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        """Create or update the account so that the stored password logs in."""
        path = settings.DATA_DIR / "demo_admin_password"
        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(secrets.token_urlsafe(12))
            path.chmod(0o600)
        password = path.read_text().strip()
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username=options["username"])
        user.is_staff = True
        user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(f"demo login: username={user.get_username()} password={password}")
