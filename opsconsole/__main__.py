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

    prog = os.path.basename(sys.argv[0])
    # `python -m opsconsole` runs this file: Django would call itself "python -m django" in its usage lines
    execute_from_command_line(["opsconsole" if prog in ("", "__main__.py") else prog, *sys.argv[1:]])


if __name__ == "__main__":
    main()
