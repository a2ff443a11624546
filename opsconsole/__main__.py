"""`opsconsole <command>` (the console script) and `python -m opsconsole <command>`: the management commands
(`migrate`, `runcontroller`, `startkind`, `crds`, ...) where opsconsole is installed from its wheel, with no
checkout and no manage.py. Settings default to `opsconsole.settings` (DJANGO_SETTINGS_MODULE overrides)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the management command named on the command line."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line([os.path.basename(sys.argv[0]) or "opsconsole", *sys.argv[1:]])


if __name__ == "__main__":
    main()
