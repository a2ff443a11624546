"""The controller SIGKILLed at a random point of a burst of 100 CR creations, then restarted: no key is left
stranded. The controller marks a key "sent" in the workqueue before it hands the key's task to the broker, so a
kill in between leaves keys queued whose task never was, and the restarted controller's adds are coalesced
with them. Their mark is released when no worker claimed them within OPSCONSOLE_WORKQUEUE_UNCLAIMED_AFTER (5 s)
and they are sent again: every CR reaches Running within 30 s of the restart, each transition once (a copy of
a task that was only waiting finds nothing to claim: no double run).

The default suite runs one kill; `-m slow` runs ten."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import dispatch, kube
from tests.faults.conftest import all_recorded, phases, with_retries
from tests.fixtures.engines import ControllerProcess
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

BURST = 100
CONVERGE_WITHIN = 30.0  # seconds after the restart


def _create(kapi, namespace: str, names: list[str]) -> dict[str, str]:
    uids = {}
    for name in names:
        obj = with_retries(lambda n=name: kube.create_object(kapi, GADGET, gadget(namespace, n, mode="ok")))
        uids[name] = obj["metadata"]["uid"]
    return uids


def _kill_during_burst(faults, kapi, namespace, run: int, rng: random.Random) -> dict[str, float | int]:
    """One kill: creates BURST Gadgets, SIGKILLs the controller after a random number of them, creates the rest,
    restarts a controller and waits until every one is Running."""
    kill_at = rng.randrange(1, BURST)
    pause = rng.uniform(0.0, 0.05)  # a random point within the controller's handling of the last creations
    names = [f"burst{run}-{i}" for i in range(BURST)]
    uids = _create(kapi, namespace, names[:kill_at])
    time.sleep(pause)
    victim = faults.controller
    os.killpg(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait(5)
    uids |= _create(kapi, namespace, names[kill_at:])  # the rest of the burst while nobody leads
    snap = dispatch.get_queue().snapshot()
    queued_at_restart = snap.depth

    replacement = ControllerProcess(faults.queue_name, faults.env)
    replacement.log_path = replacement.log_path.with_name(f"controller-{faults.queue_name}-r{run}.log")
    replacement.start()
    restarted = time.monotonic()
    faults.controller = replacement  # the engine now runs (and stops) the replacement
    wait_for(lambda: all_recorded(uids, "Running"), timeout=CONVERGE_WITHIN + 5, interval=0.2)
    converged = time.monotonic() - restarted
    assert converged <= CONVERGE_WITHIN, converged
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    return {"kill_at": kill_at, "queued_at_restart": queued_at_restart, "converged": converged}


def _report(results: list[dict[str, float | int]]) -> None:
    times = [float(r["converged"]) for r in results]
    print(f"\nFAULT controller-kill-burst: {len(results)} kill(s) during a burst of {BURST} creations "
          f"(after {[r['kill_at'] for r in results]}); queued keys at the restart "
          f"{[r['queued_at_restart'] for r in results]}; all Running {min(times):.1f}-{max(times):.1f} s after "
          f"the restart (bound {CONVERGE_WITHIN:.0f} s)")


def test_a_controller_killed_during_a_burst_strands_no_key(faults, kapi, namespace) -> None:
    rng = random.Random()
    _report([_kill_during_burst(faults, kapi, namespace, 0, rng)])


@pytest.mark.slow
def test_ten_controller_kills_during_bursts_strand_no_key(faults, kapi, namespace) -> None:
    rng = random.Random()
    _report([_kill_during_burst(faults, kapi, namespace, run, rng) for run in range(10)])
