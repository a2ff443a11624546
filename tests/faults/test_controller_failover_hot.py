"""The leading controller SIGKILLed beside a hot standby, with some hundreds of objects converged: the standby (whose
informers listed while it campaigned) reconciles an object created after the kill within the lease duration and a
margin; it does not re-enqueue the old objects at the takeover (their runs are counted), yet an object changed
while nobody led is reconciled at once."""

from __future__ import annotations

import os
import signal
import time

import pytest
from django.utils import timezone

from kubesim.testing import wait_for
from reconcilers.engine import dispatch, kube
from reconcilers.models import ReconcileRun
from tests.faults.conftest import all_recorded, create_gadgets, with_retries
from tests.faults.test_controller_kill import LEASE_DURATION, RETRY_PERIOD, _holder
from tests.fixtures.engines import ControllerProcess
from tests.fixtures.harness import wait_idle
from tests.reconcilers.testkinds import GADGET

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), pytest.mark.long_unit]

OBJECTS = 200
#: after the Lease expired: the standby's next attempt, its takeover, the enqueue and one reconcile (a loaded machine)
MARGIN = 6.0


def _runs(uids) -> int:
    return ReconcileRun.objects.filter(resource__uid__in=list(uids)).count()


def test_the_hot_standby_reconciles_a_new_object_within_the_lease_and_leaves_the_rest_to_the_resync(
        faults, kapi, namespace) -> None:
    uids = create_gadgets(kapi, namespace, OBJECTS, "old", mode="ok")
    wait_for(lambda: all_recorded(uids, "Running"), timeout=120, interval=0.2)
    standby = ControllerProcess(faults.queue_name, faults.env)
    standby.log_path = standby.log_path.with_name(f"controller-{faults.queue_name}-hot.log")
    standby.start()
    leader = faults.controller
    try:
        standby.wait_ready()
        wait_for(lambda: "hot standby synced" in standby.log(), timeout=60, interval=0.1)
        wait_idle(dispatch.get_queue(), timeout=60)
        time.sleep(LEASE_DURATION + 3)  # older than the standby's replay window, and the mirror written
        assert f"_{leader.proc.pid}_" in _holder(kapi)
        runs_before = _runs(uids.values())

        os.killpg(leader.proc.pid, signal.SIGKILL)
        killed, killed_at = time.monotonic(), timezone.now()
        leader.proc.wait(5)
        with_retries(lambda: kube.patch_object(kapi, GADGET, namespace, "old-7", {"spec": {"note": "leaderless"}}))
        fresh = create_gadgets(kapi, namespace, 1, "fresh", mode="ok")
        wait_for(lambda: all_recorded(fresh, "Running"), timeout=LEASE_DURATION + MARGIN + 10, interval=0.05)
        reconciled = time.monotonic() - killed
        assert f"_{standby.proc.pid}_" in _holder(kapi)
    finally:
        faults.controller = standby  # the engine now runs (and stops) the standby
    assert reconciled <= LEASE_DURATION + RETRY_PERIOD + MARGIN, reconciled
    changed = ReconcileRun.objects.filter(resource__uid=uids["old-7"], started_at__gte=killed_at)
    wait_for(changed.exists, timeout=10, interval=0.1)  # changed while nobody led: reconciled at the takeover
    time.sleep(2.0)
    wait_idle(dispatch.get_queue(), timeout=60)
    rerun = _runs(uids.values()) - runs_before
    assert rerun < OBJECTS // 10, rerun  # the old objects were not all enqueued again (resync: 3600 s)
    # the workqueue (Redis) kept its state across the leader change: its epoch unchanged, so no full resync
    assert "took over with warm caches" in standby.log() and "controller: resync of" not in standby.log()
    print(f"\nFAULT controller-failover-hot: a Gadget created after the leader's SIGKILL Running {reconciled:.1f} s "
          f"after it (lease {LEASE_DURATION} s); {rerun} of {OBJECTS} old Gadgets run again at the takeover "
          f"(the one changed meanwhile among them)")
