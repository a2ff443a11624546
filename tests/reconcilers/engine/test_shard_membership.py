"""Shard membership through one Lease per shard (reconcilers/engine/shards/membership.py), against kubesim, with
injected clocks: who counts, when a dead shard leaves, a clean stop, one holder per shard id."""

from __future__ import annotations

import pytest

from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE
from reconcilers.engine.shards.membership import ShardMembers, shard_elector, shard_lease_name


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def electors(kapi, namespace, clock, *shards):
    return {s: shard_elector(kapi, s, namespace=namespace, identity=f"replica-{s}", lease_duration=4,
                             renew_deadline=3, retry_period=1, clock=clock) for s in shards}


def test_three_shards_are_members_and_a_dead_one_leaves_after_its_lease_duration(kapi, namespace):
    clock = Clock()
    shards = electors(kapi, namespace, clock, "a", "b", "c")
    assert all(e.step() for e in shards.values())
    members = ShardMembers(kapi, namespace, clock=clock)
    assert members.step() == ("a", "b", "c") and members.changes == 1
    assert members.ring() is not None and members.ring().shards == ("a", "b", "c")

    # b dies: a and c renew every second, b does not
    for _ in range(3):
        clock.now += 1
        shards["a"].step(), shards["c"].step()
        assert members.step() == ("a", "b", "c")  # within b's lease duration of when its write was seen
    clock.now += 1.5
    shards["a"].step(), shards["c"].step()
    assert members.step() == ("a", "c") and members.changes == 2
    assert members.next_expiry() <= clock.now + 4


def test_a_clean_stop_releases_the_lease_and_the_shard_leaves_at_once(kapi, namespace):
    clock = Clock()
    shards = electors(kapi, namespace, clock, "a", "b")
    for e in shards.values():
        e.step()
    members = ShardMembers(kapi, namespace, clock=clock)
    assert members.step() == ("a", "b")
    assert shards["b"].release()
    assert members.step() == ("a",)
    kube.delete_object(kapi, LEASE, namespace, shard_lease_name("a"))
    assert members.step() == () and members.ring() is None


def test_a_second_replica_with_the_same_shard_id_waits_as_its_standby(kapi, namespace):
    clock = Clock()
    first = shard_elector(kapi, "a", namespace=namespace, identity="one", lease_duration=4, renew_deadline=3,
                          retry_period=1, clock=clock)
    second = shard_elector(kapi, "a", namespace=namespace, identity="two", lease_duration=4, renew_deadline=3,
                           retry_period=1, clock=clock)
    assert first.step() and not second.step()
    clock.now += 5  # the first stops renewing: the standby takes the shard once the lease expired
    assert second.step() and not first.is_leader


def test_other_leases_are_not_shards_and_bad_ids_are_refused(kapi, namespace):
    kube.create_object(kapi, LEASE, {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                                     "metadata": {"name": "opsconsole-controller", "namespace": namespace},
                                     "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15}})
    assert ShardMembers(kapi, namespace).step() == ()
    for bad in ("A", "-a", "a_b", "x" * 47, ""):
        with pytest.raises(ValueError, match="shard id"):
            shard_lease_name(bad)
