"""A poison CR whose reconcile always raises: retried with capped exponential backoff (visible in the queue
snapshot the queue view shows and in its error runs), and the other CRs converge as fast as without it."""

from __future__ import annotations

import time

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import dispatch, kube
from reconcilers.models import ReconcileRun, Resource
from tests.faults.conftest import BACKOFF_BASE, BACKOFF_CAP, all_recorded, create_gadgets, phases
from tests.reconcilers.testkinds import GADGET

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

HEALTHY = 10


def _converge(kapi, namespace: str, prefix: str) -> float:
    """Seconds from creating HEALTHY Gadgets to all of them recorded Running."""
    started = time.monotonic()
    uids = create_gadgets(kapi, namespace, HEALTHY, prefix, mode="slow", sleepSeconds=0.1)
    wait_for(lambda: all_recorded(uids, "Running"), timeout=60, interval=0.05)
    return time.monotonic() - started


def test_a_poison_cr_backs_off_to_the_cap_and_does_not_slow_the_others(faults, kapi, namespace) -> None:
    queue = dispatch.get_queue()
    baseline = _converge(kapi, namespace, "before")

    (poison_uid,) = create_gadgets(kapi, namespace, 1, "poison", mode="crash").values()
    key = GADGET.request(namespace, "poison-0").key()
    # base 50 ms doubling: the 6th failure's delay (1.6 s) is close to the 2 s cap
    wait_for(lambda: queue.failures(key) >= 6, timeout=30, interval=0.05)
    with_poison = _converge(kapi, namespace, "during")

    snap = queue.snapshot()
    (entry,) = [d for d in snap.backing_off if d.key == key] or [None]
    if entry is not None:  # between retries (not being retried right now): never further away than the cap
        assert entry.failures >= 6
        assert entry.next_retry - snap.now <= BACKOFF_CAP + 0.5
    failures_then, t0 = queue.failures(key), time.monotonic()
    wait_for(lambda: queue.failures(key) >= failures_then + 2, timeout=3 * BACKOFF_CAP + 5, interval=0.05)
    per_retry = (time.monotonic() - t0) / 2
    assert per_retry <= BACKOFF_CAP + 1.5  # capped: it keeps being retried every ~2 s, not ever later
    assert per_retry >= BACKOFF_CAP * 0.5  # and backed off: not retried in a hot loop

    errors = ReconcileRun.objects.filter(key=key, result="error")
    assert errors.count() >= 8 and set(errors.values_list("error_class", flat=True)) == {"RuntimeError"}
    # the attempt number counts the consecutive failures (what the queue view and the runs list show)
    assert errors.order_by("-id").first().attempt >= 8
    # hot-looping would be ~one run per reconcile time; backoff keeps it to about log2(cap/base) + t/cap
    assert errors.count() <= 12 + (time.monotonic() - t0 + with_poison + 10) / BACKOFF_CAP
    assert Resource.objects.get(uid=poison_uid).phase == ""  # an error records a run, never a phase
    assert phases(poison_uid) == []
    assert with_poison <= baseline * 2 + 2.0, (baseline, with_poison)
    print(f"\nFAULT poison: {HEALTHY} healthy CRs converge in {baseline:.2f} s alone, {with_poison:.2f} s next to "
          f"a poison CR; poison retried every {per_retry:.2f} s at the cap ({BACKOFF_CAP} s, base {BACKOFF_BASE} s), "
          f"{errors.count()} error runs")
    # stop the poison before the fixture waits for an idle queue
    kube.delete_object(kapi, GADGET, namespace, "poison-0")
