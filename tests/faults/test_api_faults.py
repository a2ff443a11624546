"""kubesim answering a share of every request (informers, leases, reads, writes, status) with 500 or with 429 +
Retry-After while CRs converge: all converge, each transition is recorded once, failed runs were retried."""

from __future__ import annotations

import time

import pytest

from kubesim.testing import wait_for
from reconcilers.models import ReconcileRun
from tests.faults.conftest import all_recorded, create_gadgets, phases

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CRS = 12


@pytest.mark.parametrize(("code", "rate"), [(500, 0.3), (429, 0.2)], ids=["500", "429"])
def test_crs_converge_while_the_api_fails_a_share_of_requests(faults, kapi, namespace, code, rate) -> None:
    injected_before = faults.kubesim.stats()["injectedErrors"]
    faults.kubesim.set_faults(error_rate=rate, error_code=code, retry_after=1)
    started = time.monotonic()
    uids = create_gadgets(kapi, namespace, CRS, f"flaky{code}", mode="ok")
    wait_for(lambda: all_recorded(uids, "Running"), timeout=60, interval=0.2)
    elapsed = time.monotonic() - started
    faults.kubesim.clear_faults()
    injected = faults.kubesim.stats()["injectedErrors"] - injected_before
    assert injected >= 3  # the faults were real: informers, leases, workers and this test all met them
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    runs = ReconcileRun.objects.filter(key__contains=f"/{namespace}/")
    errors = runs.filter(result="error").count()
    if code == 500:  # a 500 fails the reconcile: it is retried with backoff and recorded as an error run
        assert errors > 0
    print(f"\nFAULT api-{code}: {CRS} CRs at {rate:.0%} injected {code}s converged in {elapsed:.1f} s; "
          f"{runs.count()} runs, {errors} error runs; {injected} injected errors")
