"""The console's overview and resources pages, p50/p95 in ms, as one JSON line: run as a script
(`python bench/scale/pages.py`) from the root of the tree under test with DATABASE_URL set to the bench database,
so the pages are that tree's. Rendered in process through the whole Django stack with bench/console's `measure`
(session login, the test client), the overview's memo off (as bench/console's rows but the last).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> None:
    """Log in as an operator, time both pages, print {"overview": [p50, p95], "resources": [p50, p95]}."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="requests per page")
    args = parser.parse_args()
    sys.path[0] = os.getcwd()  # the tree under test (cwd), not this script's folder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.test import Client, override_settings

    from bench.console.__main__ import measure

    user, _ = User.objects.get_or_create(username="bench-scale-operator")
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    out = {}
    with override_settings(OPSCONSOLE_OVERVIEW_CACHE_SECONDS=0):
        for name, path in (("overview", "/"), ("resources", "/resources/")):
            out[name] = list(measure(client, path, args.requests))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
