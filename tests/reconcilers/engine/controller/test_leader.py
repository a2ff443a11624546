"""Leader election on a real kubesim Lease: mutual exclusion, takeover, release, one winner per race."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller import LEASE, LeaderElector
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import WidgetReconciler

FAST = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}


@pytest.fixture
def lease_name():
    return f"test-lease-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def electors(api, lease_name):
    made = []

    def make(identity, **durations):
        elector = LeaderElector(api, identity=identity, name=lease_name, namespace="default", **(durations or FAST))
        made.append(elector)
        return elector

    yield make
    for elector in made:
        elector.stop()


def lease(api, name):
    return kube.get_object(api, LEASE, "default", name)


class Sampler:
    """Samples is_leader of every elector every few ms in a thread; records overlaps and who led when."""

    def __init__(self, electors):
        self.electors = electors
        self.overlaps = 0
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            leading = [e.identity for e in self.electors if e.is_leader]
            if len(leading) > 1:
                self.overlaps += 1
            self.samples.append((time.monotonic(), tuple(leading)))
            time.sleep(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def test_two_electors_never_both_lead_and_the_standby_takes_over_when_the_leader_stops_renewing(
    api, electors, lease_name
):
    a, b = electors("a"), electors("b")
    with Sampler([a, b]) as sampler:
        a.start()
        b.start()
        first = wait_for(lambda: next((e for e in (a, b) if e.is_leader), None), timeout=5)
        standby = b if first is a else a
        time.sleep(1.5)  # more than a lease duration of renewals: the leader keeps it
        assert first.is_leader and not standby.is_leader

        # the leader hangs: its thread runs on but never renews again
        first.step = lambda: first.is_leader
        hung_at = time.monotonic()
        wait_for(lambda: standby.is_leader, timeout=5)
        took_over_after = time.monotonic() - hung_at
        time.sleep(0.3)
    assert sampler.overlaps == 0
    assert not first.is_leader
    # not before the leader's lease could have expired, and within lease duration + a retry or two
    assert FAST["renew_deadline"] <= took_over_after <= FAST["lease_duration"] + 3 * FAST["retry_period"] + 0.5
    stepped_down_at = next(t for t, who in sampler.samples if t > hung_at and first.identity not in who)
    assert stepped_down_at - hung_at <= FAST["renew_deadline"] + 0.2
    spec = lease(api, lease_name)["spec"]
    assert spec["holderIdentity"] == standby.identity
    assert spec["leaseTransitions"] >= 1


def test_a_released_lease_is_taken_at_once_not_after_it_expires(api, electors, lease_name):
    slow = {"lease_duration": 10.0, "renew_deadline": 6.0, "retry_period": 0.1}
    a = electors("a", **slow)
    assert a.step() is True
    b = electors("b", **slow).start()
    time.sleep(0.3)
    assert not b.is_leader
    released_at = time.monotonic()
    assert a.release() is True
    assert lease(api, lease_name)["spec"]["holderIdentity"] == ""
    wait_for(lambda: b.is_leader, timeout=3)
    assert time.monotonic() - released_at < 2.0  # far less than the 10 s lease duration
    assert not a.is_leader


def test_racing_candidates_have_exactly_one_winner(api, electors, lease_name):
    for round_ in range(3):  # round 0 races to create the Lease, later rounds to take a released one
        a, b = electors(f"a{round_}"), electors(f"b{round_}")
        barrier = threading.Barrier(2)
        results = {}

        def campaign(elector, barrier=barrier, results=results):
            barrier.wait()
            results[elector.identity] = elector.step()

        threads = [threading.Thread(target=campaign, args=(e,)) for e in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results.values()) == [False, True]
        winner = a if results[a.identity] else b
        assert lease(api, lease_name)["spec"]["holderIdentity"] == winner.identity
        winner.release()


def test_an_expired_lease_of_a_vanished_holder_is_taken_after_one_lease_duration(api, electors, lease_name):
    now = [100.0]
    dead = electors("dead")
    assert dead.step()
    b = LeaderElector(api, identity="b", name=lease_name, clock=lambda: now[0], **FAST)
    assert b.step() is False  # observed now: held and fresh
    now[0] += 0.9
    assert b.step() is False  # still within its lease duration since we saw it change
    now[0] += 0.2
    assert b.step() is True
    assert lease(api, lease_name)["spec"]["holderIdentity"] == "b"


def test_only_the_leading_controller_runs_informers(api, widget_kind, lease_name):
    def controller(identity):
        elector = LeaderElector(api, identity=identity, name=lease_name, **FAST)
        return build_controller(api, [WidgetReconciler()], elector=elector, enqueue=lambda k: True, pump=lambda: 0,
                                mirror=False)

    one, two = controller("one"), controller("two")
    try:
        for _ in range(3):
            one.step()
            two.step()
        assert one.running and not two.running
        one.shutdown()  # stops its informers and releases the Lease
        assert not one.running
        deadline = time.monotonic() + 3
        while not two.running and time.monotonic() < deadline:
            two.step()
            time.sleep(0.02)
        assert two.running and two.wait_synced(5)
    finally:
        one.shutdown()
        two.shutdown()
