"""The runner's lease renewals: one thread per process renews every run's lease each third of its lease time,
notes a lease that was lost (and renews it no more), and renews nothing once a run stopped."""

from __future__ import annotations

import threading
import time

from kubesim.testing import wait_for
from reconcilers.engine.runner import LeaseRenewer


class FakeQueue:
    def __init__(self, lease_seconds: float = 0.3) -> None:
        self.lease_seconds = lease_seconds
        self.renewed: list[tuple[str, str, str]] = []
        self.stolen: set[str] = set()

    def renew(self, key: str, owner: str) -> bool:
        self.renewed.append((key, owner, threading.current_thread().name))
        return key not in self.stolen


def test_one_thread_renews_every_runs_lease_until_it_stops():
    queue = FakeQueue()
    a, b = LeaseRenewer(queue, "a", "w1"), LeaseRenewer(queue, "b", "w2")
    a.start()
    b.start()
    wait_for(lambda: {k for k, _, _ in queue.renewed} == {"a", "b"} and len(queue.renewed) >= 6, timeout=5)
    assert {name for _, _, name in queue.renewed} == {"lease-renewals"}
    a.stop()
    b.stop()
    time.sleep(0.05)
    count = len(queue.renewed)
    time.sleep(0.35)
    assert len(queue.renewed) == count and not a.lost and not b.lost


def test_a_lease_taken_over_is_noted_lost_and_renewed_no_more():
    queue = FakeQueue()
    queue.stolen.add("c")
    lease = LeaseRenewer(queue, "c", "w1")
    lease.start()
    wait_for(lambda: lease.lost, timeout=5)
    time.sleep(0.3)
    assert [k for k, _, _ in queue.renewed].count("c") == 1
    lease.stop()


def test_a_run_longer_than_the_time_limit_is_let_go_its_lease_left_to_expire():
    """A run stuck on a drain thread (which Celery's time limit cannot kill) must not hold its key forever."""
    queue = FakeQueue(lease_seconds=0.15)
    lease = LeaseRenewer(queue, "d", "w1", max_seconds=0.2)
    lease.start()
    wait_for(lambda: lease.lost, timeout=5)
    renewed = len(queue.renewed)
    assert 1 <= renewed <= 5  # renewed while under the limit, then no more
    time.sleep(0.3)
    assert len(queue.renewed) == renewed
    lease.stop()
