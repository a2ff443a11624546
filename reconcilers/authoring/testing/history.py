"""What the engine recorded about one object, read from the engine's database in a subprocess (the test process has
no Django): `python -m reconcilers.authoring.testing.history UID [--wait-for ACTION] [--timeout S]` prints one
JSON object, `{"transitions": [...], "healing": [...]}`, each entry as `history_of` builds it.

`Engine.history` (reconcilers/authoring/testing/engine.py) runs it with the engine's environment (settings,
DATABASE_URL). With `--wait-for`, it polls until a healing record with that action exists (or the timeout passes),
in this one process, so a test waiting for `rollback.succeeded` starts Django once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def history_of(uid: str) -> dict[str, list[dict[str, Any]]]:
    """The object's transitions and healing records, in the order they were recorded."""
    from reconcilers.models import HealingRecord, Transition

    transitions = [
        {"from_phase": t.from_phase, "to_phase": t.to_phase, "reason": t.reason, "generation": t.generation,
         "actor": t.actor}
        for t in Transition.objects.filter(resource_uid=uid).order_by("seq")
    ]
    healing = [
        {"action": h.action, "rule": h.rule, "actor": h.actor, "reason": h.reason, "generation": h.generation,
         "target_generation": h.target_generation}
        for h in HealingRecord.objects.filter(resource_uid=uid).order_by("seq")
    ]
    return {"transitions": transitions, "healing": healing}


def main(argv: list[str] | None = None) -> int:
    """Print the history of the object whose uid is given (after waiting for `--wait-for`, when given)."""
    parser = argparse.ArgumentParser(prog="python -m reconcilers.authoring.testing.history")
    parser.add_argument("uid")
    parser.add_argument("--wait-for", default="", help="a healing action to wait for (e.g. rollback.succeeded)")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)

    import django

    django.setup()
    deadline = time.monotonic() + args.timeout
    while True:
        history = history_of(args.uid)
        found = any(h["action"] == args.wait_for for h in history["healing"])
        if not args.wait_for or found or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    print(json.dumps(history))
    return 0


if __name__ == "__main__":
    sys.exit(main())
