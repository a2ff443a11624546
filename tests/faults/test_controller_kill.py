"""The leading controller SIGKILLed with a standby running: the standby takes the Lease within the lease
duration, and CRs created while nobody led are reconciled (its informers list what it missed)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME
from tests.faults.conftest import all_recorded, create_gadgets, phases
from tests.fixtures.engines import ControllerProcess

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: the test controllers' --lease-duration and --retry-period (tests/fixtures/engines.py)
LEASE_DURATION = 4.0
RETRY_PERIOD = 0.5


def _holder(kapi) -> str:
    return (kube.get_object(kapi, LEASE, "default", LEASE_NAME) or {}).get("spec", {}).get("holderIdentity") or ""


def test_the_standby_takes_the_lease_within_its_duration_and_misses_nothing(faults, kapi, namespace) -> None:
    standby = ControllerProcess(faults.queue_name, faults.env)
    standby.log_path = standby.log_path.with_name(f"controller-{faults.queue_name}-standby.log")
    standby.start()
    leader = faults.controller
    try:
        standby.wait_ready()
        assert f"_{leader.proc.pid}_" in _holder(kapi)
        time.sleep(2 * RETRY_PERIOD)
        assert f"_{leader.proc.pid}_" in _holder(kapi)  # the standby waits while the leader renews

        os.killpg(leader.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        leader.proc.wait(5)
        uids = create_gadgets(kapi, namespace, 6, "leaderless", mode="ok")  # while nobody leads
        wait_for(lambda: f"_{standby.proc.pid}_" in _holder(kapi), timeout=LEASE_DURATION + 10, interval=0.05)
        takeover = time.monotonic() - killed
    finally:
        faults.controller = standby  # the engine now runs (and stops) the standby
    assert takeover <= LEASE_DURATION + RETRY_PERIOD + 1.5, takeover
    wait_for(lambda: all_recorded(uids, "Running"), timeout=30, interval=0.1)
    converged = time.monotonic() - killed
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    print(f"\nFAULT controller-kill: standby took the Lease {takeover:.1f} s after the SIGKILL "
          f"(lease {LEASE_DURATION} s); 6 CRs created meanwhile Running {converged:.1f} s after the kill")
