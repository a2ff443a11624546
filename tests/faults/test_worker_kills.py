"""Workers SIGKILLed again and again while CRs converge: every CR converges, every expected transition is
recorded exactly once, the audit chains verify (checked by the `faults` fixture).

The short form (16 CRs, 3 kills; OPSCONSOLE_FAULT_CRS / OPSCONSOLE_FAULT_KILLS resize it) runs with the suite;
the long one (200 CRs, 10 kills) is marked `slow` and runs only when asked for:
`pytest -m slow tests/faults/test_worker_kills.py -s`."""

from __future__ import annotations

import os
import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import dispatch
from reconcilers.models import ReconcileRun
from tests.faults.conftest import all_recorded, create_gadgets, phases

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

#: the short form's size (env vars to resize it); the long form's is LONG
CRS = int(os.environ.get("OPSCONSOLE_FAULT_CRS", "16"))
KILLS = int(os.environ.get("OPSCONSOLE_FAULT_KILLS", "3"))
LONG = (200, 10)
RECONCILE_SECONDS = 0.4


def _busy_worker(engine):
    """A live worker whose pool child holds a key's lease right now (so the kill lands mid-reconcile)."""
    for item in dispatch.get_queue().snapshot().processing:
        pid = int(item.owner.rsplit(":", 2)[1])
        for worker in engine.workers:
            if worker.proc is not None and worker.proc.poll() is None and pid in worker.children():
                return worker
    return None


@pytest.mark.parametrize(("crs", "kill_count"), [
    pytest.param(CRS, KILLS, id="short", marks=pytest.mark.timeout(max(300, 120 + 6 * CRS))),
    pytest.param(*LONG, id="long", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])
def test_workers_killed_repeatedly_mid_reconcile_every_cr_converges_with_each_transition_once(
        faults, kapi, namespace, crs, kill_count) -> None:
    started = time.monotonic()
    uids = create_gadgets(kapi, namespace, crs, "kill", mode="slow", sleepSeconds=RECONCILE_SECONDS)
    kills = 0
    while kills < kill_count:
        victim = wait_for(lambda: _busy_worker(faults), timeout=30, interval=0.02)
        victim.kill()  # SIGKILL: main process and pool child, in the middle of a reconcile
        kills += 1
        victim.stop()
        faults.workers.remove(victim)
        faults.start_worker(f"{victim.name}k")  # a replacement, not awaited: the next kill may come first
        time.sleep(1.0)
    # the replacements are up once their pool child is (a ping would queue behind the reconciles' backlog)
    wait_for(lambda: all(w.children() for w in faults.workers), timeout=60, interval=0.2)
    # every reconcile, done twice over on one worker, plus slack: never the limit of a healthy run
    wait_for(lambda: all_recorded(uids, "Running"), timeout=60 + 2 * crs * RECONCILE_SECONDS, interval=0.2)
    elapsed = time.monotonic() - started
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    runs = ReconcileRun.objects.filter(key__contains=f"/{namespace}/")
    assert runs.filter(result="success").values("key").distinct().count() == crs
    print(f"\nFAULT worker-kills: {crs} CRs, {kills} SIGKILLs, converged in {elapsed:.1f} s, "
          f"{runs.count()} runs recorded ({runs.filter(result='error').count()} errors)")
