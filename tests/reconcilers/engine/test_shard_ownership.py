"""Which keys a controller shard acts on (reconcilers/engine/shards/ownership.py), with real shard Leases on
kubesim, injected clocks and a fixed key set: a partition of the keys, the handover on join and leave (the old
owner stops before the new one starts), a canary shard's selection, unplaced keys, and the filtering handoff."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from unittest.mock import ANY

import pytest
from django.core.management import CommandError, call_command

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, metrics
from reconcilers.engine.controller.events import InformerEvent
from reconcilers.engine.controller.handoff import MirrorUpdate
from reconcilers.engine.controller.leader import LEASE
from reconcilers.engine.shards.handoff import ShardHandoff
from reconcilers.engine.shards.membership import ShardMembers, shard_elector
from reconcilers.engine.shards.ownership import KEYS, PENDING, SELECTOR, VIEW, ShardOwnership
from reconcilers.engine.shards.selector import parse
from reconcilers.engine.shards.setup import ShardStepper, handover_trigger

KIND = ResourceKind("example.com", "v1", "gadgets", "Gadget", True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def obj(i: int, *, ns: str = "ns", labels: dict | None = None) -> dict:
    return {"metadata": {"name": f"g{i}", "namespace": ns, "uid": f"uid-{i}", "labels": labels or {}}}


def key(i: int, ns: str = "ns") -> str:
    return f"example.com/v1/gadgets/{ns}/g{i}"


class Replica:
    """One shard replica: its Lease's elector, its view of the membership, its ownership of `objects`."""

    def __init__(self, kapi, namespace, clock, shard, objects, selector=None, by="uid") -> None:
        self.elector = shard_elector(kapi, shard, namespace=namespace, identity=f"replica-{shard}",
                                     lease_duration=4, renew_deadline=3, retry_period=1, clock=clock)
        if selector:
            self.elector.annotations = {SELECTOR: selector}
        self.members = ShardMembers(kapi, namespace, clock=clock)
        self.objects = objects
        self.ownership = ShardOwnership(
            shard, self.members, objects=lambda labels: list(self.objects.items()), by=by, selector=selector,
            leading=lambda: self.elector.is_leader, annotate=self._annotate, reassign_interval=0.0, clock=clock)
        self.gained: list[str] = []

    def _annotate(self, annotations):
        self.elector.annotations = annotations

    def step(self) -> list[str]:
        """As ShardStepper does it: a view changed is written into the Lease at once."""
        self.elector.step()
        before = dict(self.elector.annotations)
        got = self.ownership.step(self.members.step())
        if self.elector.annotations != before:
            self.elector.step()
        self.gained.extend(got)
        return got

    def mine(self) -> set[str]:
        return {k for k in self.objects if self.ownership.owns(k)}


def settle(replicas, rounds=3):
    for r in replicas:  # every Lease held first: the shards start together
        r.elector.step()
    for _ in range(rounds):
        for r in replicas:
            r.step()


@pytest.fixture
def objects():
    return {key(i): obj(i) for i in range(300)}


def test_three_shards_partition_the_keys_and_each_is_enqueued_once(kapi, namespace, objects):
    clock = Clock()
    replicas = [Replica(kapi, namespace, clock, s, objects) for s in "abc"]
    settle(replicas)
    owned = [r.mine() for r in replicas]
    assert sum(len(o) for o in owned) == len(objects) and set().union(*owned) == set(objects)
    assert all(60 <= len(o) <= 125 for o in owned), [len(o) for o in owned]  # bounded: ≤ ceil(1.25 × 100)
    assert sorted(k for r in replicas for k in r.gained) == sorted(objects)  # each handed over exactly once
    lease = replicas[0].elector
    assert lease.annotations[VIEW] == replicas[1].elector.annotations[VIEW]
    assert int(lease.annotations[KEYS]) == len(owned[0]) and lease.annotations[PENDING] == "0"
    assert metrics.SHARD_KEYS.labels("a", "owned")._value.get() == len(owned[0])
    assert metrics.SHARD_KEYS.labels("a", "pending")._value.get() == 0


def test_a_joining_shard_starts_only_after_the_old_owners_have_seen_it(kapi, namespace, objects):
    clock = Clock()
    a, b, c = (Replica(kapi, namespace, clock, s, objects) for s in "abc")
    settle([a, b, c])
    before = {s: r.mine() for s, r in zip("abc", (a, b, c), strict=True)}
    d = Replica(kapi, namespace, clock, "d", objects)
    assert d.step() == []  # its gains wait: a, b and c still act on the old view
    assert d.mine() == set() and int(d.elector.annotations[PENDING]) > 0
    token = d.ownership._view.token
    a.step()  # a sees d: stops acting on what moves to d at once, and says so in its Lease
    assert a.elector.annotations[VIEW] == token
    moved_from_a = before["a"] - a.mine()
    assert moved_from_a and not (moved_from_a & d.mine())
    assert set(d.step()) == moved_from_a  # b and c have not seen d yet: what they hand over waits
    b.step(), c.step()  # noqa: B018
    d.step()
    owners = [r.mine() for r in (a, b, c, d)]
    assert sum(len(o) for o in owners) == len(objects) and set().union(*owners) == set(objects)
    moved = sum(1 for k in objects if k in d.mine())
    assert moved <= 0.30 * len(objects), moved  # about a quarter, never more than 30 %
    assert d.ownership.handover_waits == len(d.mine())


def test_a_shard_that_releases_its_lease_leaves_its_keys_to_the_others_at_once(kapi, namespace, objects):
    clock = Clock()
    replicas = [Replica(kapi, namespace, clock, s, objects) for s in "abc"]
    settle(replicas)
    b_keys = replicas[1].mine()
    assert replicas[1].elector.release()
    replicas[1].ownership.step(())
    assert replicas[1].mine() == set()
    a, c = replicas[0], replicas[2]
    before = a.mine() | c.mine()
    a.gained, c.gained = [], []
    a.step(), c.step()  # noqa: B018
    owners = [a.mine(), c.mine()]
    assert set().union(*owners) == set(objects) and not owners[0] & owners[1]
    assert b_keys <= set(a.gained) | set(c.gained)
    # bounded loads may move a few of the others' keys too, never many
    assert set(a.gained) | set(c.gained) == b_keys  # no handover between the two that stay
    assert not (a.mine() | c.mine()) - before - b_keys


def test_a_canary_shard_takes_exactly_the_objects_its_selector_matches(kapi, namespace):
    clock = Clock()
    objects = {key(i): obj(i, labels={"opsconsole.io/canary": "true"} if i % 10 == 0 else {}) for i in range(100)}
    a, b = (Replica(kapi, namespace, clock, s, objects) for s in "ab")
    settle([a, b])
    canary = Replica(kapi, namespace, clock, "canary", objects, selector="opsconsole.io/canary=true")
    settle([canary, a, b])
    labelled = {key(i) for i in range(0, 100, 10)}
    assert canary.mine() == labelled
    assert not (a.mine() | b.mine()) & labelled
    assert a.mine() | b.mine() | labelled == set(objects)
    assert a.elector.annotations[VIEW] == canary.elector.annotations[VIEW]
    assert canary.elector.annotations[SELECTOR] == "opsconsole.io/canary=true"


def test_a_new_key_is_judged_alone_the_same_by_every_shard_until_it_is_placed(kapi, namespace, objects):
    clock = Clock()
    replicas = [Replica(kapi, namespace, clock, s, objects) for s in "abc"]
    settle(replicas)
    new = obj(1000)
    for r in replicas:
        r.ownership.observe(InformerEvent("ADDED", KIND, new))
    assert sum(r.ownership.owns(key(1000)) for r in replicas) == 1


def test_by_namespace_keeps_a_namespace_on_one_shard(kapi, namespace):
    clock = Clock()
    objects = {key(i, f"ns{i % 7}"): obj(i, ns=f"ns{i % 7}") for i in range(70)}
    replicas = [Replica(kapi, namespace, clock, s, objects, by="namespace") for s in "ab"]
    settle(replicas)
    for n in range(7):
        keys = {k for k in objects if f"/ns{n}/" in k}
        assert any(keys <= r.mine() for r in replicas), n


def test_the_shard_handoff_lets_through_only_the_shards_keys_tagged_with_it(kapi, namespace, objects):
    clock = Clock()
    a, b = (Replica(kapi, namespace, clock, s, objects) for s in "ab")
    settle([a, b])
    handoff = ShardHandoff(a.ownership, ["example.com/v1/gadgets/"])
    mine, theirs = sorted(a.mine())[0], sorted(b.mine())[0]
    for k in (mine, theirs):
        handoff.put_object(k, objects[k])
        handoff.put_key(k, {"type": "resync"})
        handoff.put_mirror(MirrorUpdate(KIND, objects[k]["metadata"]["uid"], objects[k]))
    handoff.put_object("/v1/pods/ns/child", {"metadata": {"name": "child"}})  # a child: whoever's
    cached, keys = handoff.take_objects_and_keys(10)
    assert keys == [mine] and set(cached) == {mine, "/v1/pods/ns/child"}
    assert handoff.take_triggers([mine]) == {mine: ([{"type": "resync", "shard": "a"}], 0)}
    assert [u.uid for u in handoff.take_mirror(10)] == [objects[mine]["metadata"]["uid"]]
    handoff.put_keys_as_leader([theirs])  # healing, on the elected replica
    assert handoff.take_objects_and_keys(10)[1] == [theirs]


def test_selectors_parse_and_match_and_bad_ones_are_named():
    sel = parse("opsconsole.io/canary=true, tier in (a,b), !legacy, env!=prod")
    assert sel.matches({"opsconsole.io/canary": "true", "tier": "a"})
    assert not sel.matches({"opsconsole.io/canary": "true", "tier": "c"})
    assert not sel.matches({"opsconsole.io/canary": "true", "tier": "a", "legacy": "1"})
    assert not sel.matches({"opsconsole.io/canary": "true", "tier": "a", "env": "prod"})
    with pytest.raises(ValueError, match="'=oops'"):
        parse("a=b,=oops")
    with pytest.raises(ValueError, match="empty"):
        parse(" ")
    with pytest.raises(ValueError, match="shard-by"):
        ShardOwnership("a", None, objects=lambda labels: [], leading=lambda: True, annotate=lambda a: None,
                       by="name")


class FakeInformer:
    def __init__(self, objects):
        self.objects, self.listed_at = objects, datetime(2026, 12, 7, tzinfo=UTC)

    def get(self, key):
        return self.objects.get(key)


class FakeController:
    def __init__(self, objects):
        self.informers = {("example.com", "gadgets"): FakeInformer(objects)}
        self.kinds = SimpleNamespace(primary={("example.com", "gadgets"): KIND})

    def synced(self):
        return True


def test_the_stepper_enqueues_handed_over_keys_dropping_their_cache_entries_and_asks_the_leader_for_a_sweep(
        kapi, namespace, objects):
    clock = Clock()
    a = Replica(kapi, namespace, clock, "a", objects)
    a.elector.step()
    handoff = ShardHandoff(a.ownership, ["example.com/v1/gadgets/"])
    leading = {"now": False}
    stepper = ShardStepper(a.members, a.ownership, handoff, FakeController(objects), a.elector, 1.0,
                           cluster_leading=lambda: leading["now"])
    assert sorted(stepper.step()) == sorted(objects)  # alone: every key, once
    cached, keys = handoff.take_objects_and_keys(1000)
    # each key's cache entry dropped before it: the informer's copy is slim (no managedFields, which provenance
    # reads), so the run GETs the object whole
    assert sorted(keys) == sorted(objects) and cached == {k: None for k in objects}
    assert handoff.take_triggers([key(0)])[key(0)][0] == [{**handover_trigger(), "at": ANY, "shard": "a"}]
    written = kube.get_object(kapi, LEASE, namespace, "opsconsole-shard-a")["metadata"]["annotations"]
    assert written[VIEW] == a.ownership.view_token  # written at once, not at the next renewal
    assert handoff.take_sweeps() == []  # not the cluster leader
    leading["now"] = True
    assert stepper.step() == [] and [s.kind for s in handoff.take_sweeps()] == [("example.com", "gadgets")]
    stepper.step()
    assert handoff.take_sweeps() == []  # once per view


@pytest.mark.parametrize(("args", "named"), [
    (["--shard", "Shard_A"], "shard id 'Shard_A'"),
    (["--selector", "opsconsole.io/canary=true,=x"], "'=x' is not a label requirement"),
    (["--shard", "a", "--shard-by", "name"], "invalid choice: 'name'"),
])
def test_runcontroller_refuses_a_bad_shard_before_starting(args, named):
    with pytest.raises(CommandError, match=re.escape(named)):
        call_command("runcontroller", *args)
