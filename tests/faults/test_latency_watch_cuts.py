"""kubesim adding latency to a share of requests and dropping every watch connection mid-stream, again and again,
while CRs are created and then changed: every CR converges and every change is observed (the informers
resume from their last resourceVersion: no key is missed, and the periodic resync is an hour away), the
broken watches show in the controller's metrics as restarts (not errors: nothing backs off for them), the
workers' reconcile metrics agree with the runs recorded, and no process restarted (no crash loop)."""

from __future__ import annotations

import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import dispatch, kube
from reconcilers.models import ReconcileRun, Resource
from tests.faults.conftest import all_recorded, create_gadgets, phases, with_retries
from tests.fixtures.engines import ControllerProcess, wait_idle
from tests.reconcilers.testkinds import GADGET
from tests.support.metrics_read import free_port, multiprocess_text, sample_sum, scrape, worker_metrics_dir

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CRS = 12
LATENCY = 0.2  # seconds added ...
LATENCY_RATE = 0.3  # ... to this share of API requests
CUT_INTERVAL = 1.5  # every watch connection is dropped this long after it opened
GADGETS = "gadgets.test.opsconsole.io"  # the informer's `resource` label


def _observed(uids: dict[str, str], generation: int) -> bool:
    """Every object's recorded status has observed `generation`."""
    return Resource.objects.filter(uid__in=uids.values(), observed_generation=generation).count() == len(uids)


def _worker_metric(faults, name: str, **labels: str) -> float:
    return sum(sample_sum(multiprocess_text(worker_metrics_dir(w.proc.pid)), name, **labels) for w in faults.workers)


@pytest.fixture
def metered(faults):
    """The fault engine with its controller replaced by one serving /metrics on a free port (the port)."""
    port = free_port()
    faults.controller.stop()  # a clean stop releases the Lease: the new controller leads at once
    controller = ControllerProcess(faults.queue_name, {**faults.env, "OPSCONSOLE_CONTROLLER_METRICS_PORT": str(port)})
    controller.log_path = controller.log_path.with_name(f"controller-{faults.queue_name}-metered.log")
    faults.controller = controller.start()
    controller.wait_ready()
    wait_for(lambda: sample_sum(scrape(port), "leader_election_master_status") == 1, timeout=30, interval=0.2)
    return port


def test_crs_converge_and_every_change_is_seen_while_requests_are_slow_and_watches_keep_breaking(
        faults, metered, kapi, namespace) -> None:
    wait_idle(dispatch.get_queue(), timeout=60)  # the new controller's first list re-queued earlier tests' CRs
    gadget_runs_before = ReconcileRun.objects.filter(kind="Gadget").count()
    before = faults.kubesim.stats()
    broken_before = sample_sum(scrape(metered), "opsconsole_informer_restarts_total", reason="broken")
    errors_before = sample_sum(scrape(metered), "opsconsole_informer_restarts_total", reason="error")
    reconciles_before = _worker_metric(faults, "controller_runtime_reconcile_total", controller="gadget")
    pids = {"controller": faults.controller.proc.pid, **{w.name: w.proc.pid for w in faults.workers}}
    children = {w.name: set(w.children()) for w in faults.workers}

    faults.kubesim.set_faults(latency=LATENCY, latency_rate=LATENCY_RATE, watch_cut_interval=CUT_INTERVAL)
    started = time.monotonic()
    uids = create_gadgets(kapi, namespace, CRS, "cut", mode="ok")
    wait_for(lambda: all_recorded(uids, "Running"), timeout=60, interval=0.2)
    created = time.monotonic() - started
    time.sleep(CUT_INTERVAL)  # every watch is cut at least once more before the changes
    started = time.monotonic()
    for name in uids:  # a spec change each (generation 2): seen only through a watch event
        with_retries(lambda n=name: kube.patch_object(kapi, GADGET, namespace, n, {"spec": {"note": "changed"}}))
    wait_for(lambda: _observed(uids, 2), timeout=60, interval=0.2)
    changed = time.monotonic() - started
    faults.kubesim.clear_faults()  # then the count: a watch cut after it was read would be a break with no cut
    stats = faults.kubesim.stats()

    cuts = stats["watchesCut"] - before["watchesCut"]
    delayed = stats["delayedRequests"] - before["delayedRequests"]
    assert cuts >= 8 and delayed >= 10  # the faults were real
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name

    page = scrape(metered)
    broken = sample_sum(page, "opsconsole_informer_restarts_total", reason="broken") - broken_before
    gadget_breaks = sample_sum(page, "opsconsole_informer_restarts_total", resource=GADGETS, reason="broken")
    assert gadget_breaks >= 2 and 0 < broken <= cuts  # the breaks are counted, and only real ones
    assert sample_sum(page, "opsconsole_informer_restarts_total", reason="error") == errors_before
    runs = ReconcileRun.objects.filter(key__contains=f"/{namespace}/")
    wait_idle(dispatch.get_queue(), timeout=30)
    recorded = ReconcileRun.objects.filter(kind="Gadget").count() - gadget_runs_before
    # a run's metric is counted just after its key is done in the queue (which wait_idle sees): the last one's
    # may come a moment later (36 counted against 37 recorded in a loaded CI run)
    wait_for(lambda: _worker_metric(faults, "controller_runtime_reconcile_total", controller="gadget")
             - reconciles_before >= recorded, timeout=10, interval=0.2)
    counted = _worker_metric(faults, "controller_runtime_reconcile_total", controller="gadget") - reconciles_before
    assert counted == recorded >= runs.count()  # the workers' metrics agree with the runs recorded

    assert faults.controller.proc.poll() is None and all(w.proc.poll() is None for w in faults.workers)
    assert {"controller": faults.controller.proc.pid, **{w.name: w.proc.pid for w in faults.workers}} == pids
    assert {w.name: set(w.children()) for w in faults.workers} == children  # no pool child died either
    reconcile_time = (_worker_metric(faults, "controller_runtime_reconcile_time_seconds_sum", controller="gadget"),
                      _worker_metric(faults, "controller_runtime_reconcile_time_seconds_count", controller="gadget"))
    print(f"\nFAULT latency-watch-cuts: {CRS} CRs Running in {created:.1f} s and their spec changes observed in "
          f"{changed:.1f} s with {LATENCY_RATE:.0%} of requests delayed {LATENCY} s ({delayed} delayed) and every "
          f"watch dropped {CUT_INTERVAL} s after it opened ({cuts} cuts; {broken:.0f} informer restarts counted "
          f"broken, 0 errors); {runs.count()} runs; mean gadget reconcile "
          f"{reconcile_time[0] / max(reconcile_time[1], 1):.2f} s over the session; no process restarted")
