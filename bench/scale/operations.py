"""What runs after the rest window, in this order: the console's overview and resources pages (pages.py, in the tree
under test), `manage.py audit_verify` and `manage.py audit_checkpoint` (wall time, Django's start-up included, so
the bare start-up is timed too), the controller's start-up and a failover.

Start-up: the controller is stopped (SIGTERM: it gives the Lease up) and a new one started; an object created at
that moment is in its first list, so the time to its first reconcile is the start-up (Django, the informers'
lists, the enqueueing) plus the wait behind whatever else that list enqueued; the time until the queue is idle
again, and the runs in between, say what a restart costs the workers. Failover: a standby controller started beside
the leader; once it has campaigned for --quiet-seconds (a hot standby, the default: once its informers have listed
too), the leader is SIGKILLed (so its Lease must expire: 8 s by default) and an object created; the time to its first
reconcile is the failover.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fleet import Fleet, Log

PAGES = Path(__file__).resolve().parent / "pages.py"
OPERATIONS = ("pages", "commands", "startup", "failover")  # after the window, in this order


def run_all(fleet: Fleet, out: dict[str, Any], log: Log) -> None:
    """Every operation, each figure into `out`."""
    tag = f"[{fleet.label} n={fleet.n}]"
    for name, operation in (("pages", pages), ("commands", commands), ("startup", startup), ("failover", failover)):
        if name in fleet.cfg.skip:
            log(f"{tag} {name}: skipped")
            continue
        out[name] = operation(fleet)
        log(f"{tag} {name}: {out[name]}")


def pages(fleet: Fleet) -> dict[str, list[float]]:
    """page -> [p50, p95] ms of the overview and the resources page (pages.py, run in the tree under test)."""
    env = {**fleet.env, "KUBECONFIG": "/nonexistent/kubeconfig"}  # engine reads answer "unreachable" at once
    done = subprocess.run([sys.executable, str(PAGES), "--requests", str(fleet.cfg.page_requests)], cwd=fleet.root,
                          env=env, capture_output=True, text=True, timeout=fleet.cfg.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"pages.py failed:\n{done.stderr[-3000:]}")
    result: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _timed(fleet: Fleet, cmd: list[str]) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=fleet.root, env=fleet.env, capture_output=True, text=True,
                          timeout=fleet.cfg.timeout)
    return {"seconds": time.monotonic() - started, "rc": done.returncode,
            "output": (done.stdout + done.stderr).strip()[-400:]}


def commands(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """The wall time (and exit status) of Django's bare start-up, `audit_verify` and `audit_checkpoint`."""
    return {
        "django_setup": _timed(fleet, [sys.executable, "-c", "import django; django.setup()"]),
        "audit_verify": _timed(fleet, [sys.executable, "manage.py", "audit_verify"]),
        "audit_checkpoint": _timed(fleet, [sys.executable, "manage.py", "audit_checkpoint"]),
    }


def _probe(fleet: Fleet, name: str, since: float) -> dict[str, Any]:
    """Create the probe object `name`, wait for its first reconcile and then for the queue to go idle."""
    from .fleet import PROBE_NS

    fleet.create(PROBE_NS, [name])
    rec, timeout = fleet.record, fleet.cfg.timeout
    at = rec.wait_first_start(fleet.kind.key(PROBE_NS, name), since, timeout)
    if at is None:
        raise RuntimeError(f"{name} not reconciled within {timeout:g} s")
    last = rec.wait_quiet(fleet.cfg.quiet_seconds, timeout)
    return {"probe_seconds": at - since, "idle_after_seconds": max(last, at) - since,
            "runs": rec.runs_since(since)}


def startup(fleet: Fleet) -> dict[str, Any]:
    """Stop the controller, start another, time the probe (see the module docstring)."""
    fleet.controller.stop()
    since = time.time()
    fleet.controller = fleet.new_controller("controller-restarted")
    fleet.controller.start()
    return _probe(fleet, "startup-probe", since)


def failover(fleet: Fleet) -> dict[str, Any]:
    """Start a standby, SIGKILL the leader, time the probe (see the module docstring)."""
    standby = fleet.new_controller("controller-standby")
    hot = fleet.env.get("OPSCONSOLE_STANDBY", "hot") == "hot"
    if hot:  # its INFO line says when its informers have listed
        standby.environment = {**standby.environment, "LOG_LEVEL": "INFO"}
    fleet.others.append(standby)
    standby.start()
    standby.wait_for_line(" reconciling ", fleet.cfg.startup_timeout)
    if hot:
        standby.wait_for_line("hot standby synced", fleet.cfg.startup_timeout)
    time.sleep(fleet.cfg.quiet_seconds)  # it campaigns a while before the leader dies
    since = time.time()
    fleet.controller.kill(signal.SIGKILL)
    fleet.controller = standby
    return _probe(fleet, "failover-probe", since)
