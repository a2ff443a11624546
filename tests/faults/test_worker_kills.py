"""Workers SIGKILLed again and again while CRs converge: every CR converges, every expected transition is
recorded exactly once, the audit chains verify (checked by the `faults` fixture)."""

from __future__ import annotations

import os
import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import dispatch
from reconcilers.models import ReconcileRun
from tests.faults.conftest import all_recorded, create_gadgets, phases

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: the short default; OPSCONSOLE_FAULT_CRS=200 OPSCONSOLE_FAULT_KILLS=10 for the long variant
CRS = int(os.environ.get("OPSCONSOLE_FAULT_CRS", "16"))
KILLS = int(os.environ.get("OPSCONSOLE_FAULT_KILLS", "3"))


def _busy_worker(engine):
    """A live worker whose pool child holds a key's lease right now (so the kill lands mid-reconcile)."""
    for item in dispatch.get_queue().snapshot().processing:
        pid = int(item.owner.rsplit(":", 2)[1])
        for worker in engine.workers:
            if worker.proc is not None and worker.proc.poll() is None and pid in worker.children():
                return worker
    return None


def test_workers_killed_repeatedly_mid_reconcile_every_cr_converges_with_each_transition_once(
        faults, kapi, namespace) -> None:
    started = time.monotonic()
    uids = create_gadgets(kapi, namespace, CRS, "kill", mode="slow", sleepSeconds=0.4)
    kills = 0
    while kills < KILLS:
        victim = wait_for(lambda: _busy_worker(faults), timeout=30, interval=0.02)
        victim.kill()  # SIGKILL: main process and pool child, in the middle of a reconcile
        kills += 1
        victim.stop()
        faults.workers.remove(victim)
        faults.start_worker(f"{victim.name}k")  # a replacement, not awaited: the next kill may come first
        time.sleep(1.0)
    faults.wait_workers()
    wait_for(lambda: all_recorded(uids, "Running"), timeout=90, interval=0.2)
    elapsed = time.monotonic() - started
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    runs = ReconcileRun.objects.filter(key__contains=f"/{namespace}/")
    assert runs.filter(result="success").values("key").distinct().count() == CRS
    print(f"\nFAULT worker-kills: {CRS} CRs, {kills} SIGKILLs, converged in {elapsed:.1f} s, "
          f"{runs.count()} runs recorded")
