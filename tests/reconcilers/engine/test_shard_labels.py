"""Controller shards by label (reconcilers/engine/shards/labels.py and sharder.py), on the session's kubesim with
real shard Leases and Gadgets: the sharder's decisions (label a new object, drain one that moves off a live shard,
relabel at once off a dead or forged owner, no patch when nothing differs), a shard's release of a drained object,
the rule that an object leaving a shard's selector is never handed off as a deletion, the mirror sweep and object
cache prune of the reconciled kinds reading the sharder's view, and `--shard-informers` refused when unknown."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command

from kubesim.testing import wait_for
from reconcilers.engine import kube, metrics
from reconcilers.engine.controller.events import DELETED, MODIFIED, InformerEvent
from reconcilers.engine.controller.kindmap import KindMap, kind_id
from reconcilers.engine.controller.routing import EventRouter
from reconcilers.engine.shards.handoff import ShardHandoff
from reconcilers.engine.shards.labels import CACHED, DRAIN, OWNER, LabelOwnership, shard_selector
from reconcilers.engine.shards.membership import ShardMembers, shard_elector
from reconcilers.engine.shards.ownership import KEYS, PENDING
from reconcilers.engine.shards.sharder import Sharder, decide
from tests.reconcilers.testkinds import GADGET, GadgetReconciler, gadget

PREFIX = "test.opsconsole.io/v1/gadgets/"


@pytest.mark.parametrize(("owner", "draining", "want", "expected"), [
    ("", False, "a", ("label", {OWNER: "a"})),  # a new object
    ("a", False, "a", None),  # nothing differs: no patch
    ("a", False, "b", ("drain", {DRAIN: "true"})),  # off a live owner: it lets go first
    ("a", True, "b", None),  # waiting for the live owner to let go
    ("a", True, "a", None),  # back to the owner that is letting go: after it has
    ("", True, "b", ("label", {OWNER: "b", DRAIN: None})),  # let go with the drain label left: labelled
    ("dead", False, "a", ("relabel", {OWNER: "a"})),  # the owner is not live: at once
    ("dead", True, "a", ("relabel", {OWNER: "a", DRAIN: None})),
    ("forged", False, "b", ("relabel", {OWNER: "b"})),  # a label no shard holds: corrected
    ("a", False, None, None),  # no live shard to give it to: left as it is
])
def test_the_sharder_decides_what_to_patch(owner, draining, want, expected):
    assert decide(owner, draining, want, {"a", "b"}) == expected


class Shards:
    """Shard Leases in the test's namespace, the membership as one replica reads it, and the Gadgets there."""

    def __init__(self, kapi, namespace):
        self.kapi, self.namespace = kapi, namespace
        self.electors = {}
        self.members = ShardMembers(kapi, namespace)

    def live(self, *shards):
        for shard in shards:
            elector = self.electors.get(shard) or shard_elector(
                self.kapi, shard, namespace=self.namespace, identity=f"replica-{shard}", lease_duration=30,
                renew_deadline=20, retry_period=1)
            self.electors[shard] = elector
            elector.step()
        return self.members.step()

    def labels(self):
        items = kube.list_objects(self.kapi, GADGET, self.namespace).items
        return {o["metadata"]["name"]: (o["metadata"].get("labels") or {}) for o in items}


def ownership(kapi, shards, shard, cached=lambda key: False):
    return LabelOwnership(shard, shards.members, api=kapi, cached=cached, count=lambda: 0, leading=lambda: True,
                          annotate=lambda annotations: None)


def sharder_of(kapi, namespace, shards, shard="a"):
    sweeps = []
    sharder = Sharder(kapi, KindMap.of([GadgetReconciler()]), ownership(kapi, shards, shard), shards.members,
                      leading=lambda: True, sweep=lambda kid, at: sweeps.append(kid),
                      informer_options={"namespace": namespace})
    sharder.step()  # starts its informers
    wait_for(sharder.synced, timeout=10)
    return sharder, sweeps


def settle(sharder, shards, done):
    """Passes until `done(labels)`, the sharder's cache catching up with its own patches."""
    def passed():
        sharder._not_before = -float("inf")
        sharder.step()
        return done(shards.labels())
    wait_for(passed, timeout=10, interval=0.05)


def test_the_sharder_labels_moves_by_drain_and_relabels_off_a_dead_owner(kapi, namespace):
    shards = Shards(kapi, namespace)
    shards.live("a", "b")
    names = [f"g{i}" for i in range(12)]
    for name in names:
        kube.create_object(kapi, GADGET, gadget(namespace, name, mode="ok"))
    sharder, sweeps = sharder_of(kapi, namespace, shards)
    try:
        before = metrics.SHARD_LABEL_PATCHES.labels("a", "label")._value.get()
        settle(sharder, shards, lambda labels: all(labels[n].get(OWNER) in ("a", "b") for n in names))
        labelled = shards.labels()
        assert {labelled[n][OWNER] for n in names} == {"a", "b"}
        assert metrics.SHARD_LABEL_PATCHES.labels("a", "label")._value.get() - before == 12
        wait_for(lambda: all(o["metadata"].get("labels") for o in sharder.informers[kind_id(GADGET)].items()))
        sharder._not_before = -float("inf")
        sharder._dirty = True
        assert sharder.step() == 0  # nothing differs: no patch

        # c joins: what moves to c off a (live) is drained first, its owner label kept until a lets go
        shards.live("a", "b", "c")
        settle(sharder, shards, lambda labels: any(DRAIN in labels[n] for n in names))
        labels = shards.labels()
        drained = {n for n, lab in labels.items() if DRAIN in lab}
        assert all(labels[n][OWNER] in ("a", "b") for n in drained)
        assert not any(lab.get(OWNER) == "c" for lab in labels.values())
        # the owners let go (as their stepper does on seeing the drain label): then c is labelled
        for shard in ("a", "b"):
            own = ownership(kapi, shards, shard)
            for obj in kube.list_objects(kapi, GADGET, namespace).items:
                if obj["metadata"]["labels"].get(OWNER) == shard:
                    own.observe(InformerEvent(MODIFIED, GADGET, obj, obj))
            assert own.release() == sum(1 for n in drained if labels[n][OWNER] == shard)
        # each drained object is labelled with its new shard (c, or, the bounds moving, another live one)
        settle(sharder, shards, lambda now: all(now[n].get(OWNER) not in ("", None, labels[n][OWNER])
                                                and DRAIN not in now[n] for n in drained))
        assert "c" in {shards.labels()[n][OWNER] for n in drained}

        # b's Lease released: its objects go to a and c at once (no drain: nobody to wait for)
        b_objects = {n for n, lab in shards.labels().items() if lab.get(OWNER) == "b"}
        assert b_objects
        assert shards.electors["b"].release()
        shards.members.step()
        settle(sharder, shards, lambda labels: all(labels[n].get(OWNER) in ("a", "c") for n in b_objects))
        assert not any(DRAIN in lab for n, lab in shards.labels().items() if n in b_objects)

        # a forged owner is corrected: to a shard nobody holds at once
        kube.patch_object(kapi, GADGET, namespace, "g0", {"metadata": {"labels": {OWNER: "forged"}}})
        settle(sharder, shards, lambda labels: labels["g0"].get(OWNER) in ("a", "c"))

        # a deletion no live shard watched asks for a sweep
        kube.patch_object(kapi, GADGET, namespace, "g1", {"metadata": {"labels": {OWNER: "gone"}}})
        kube.delete_object(kapi, GADGET, namespace, "g1")
        wait_for(lambda: kind_id(GADGET) in sweeps, timeout=10)
    finally:
        sharder.stop()


def test_a_drained_object_is_let_go_of_and_counted_pending(kapi, namespace):
    shards = Shards(kapi, namespace)
    shards.live("a")
    body = gadget(namespace, "d", mode="ok")
    body["metadata"]["labels"] = {OWNER: "a", DRAIN: "true"}
    obj = kube.create_object(kapi, GADGET, body)
    key = f"{PREFIX}{namespace}/d"
    woken, written = [], {}
    own = LabelOwnership("a", shards.members, api=kapi, cached=lambda k: k == key, count=lambda: 1,
                         leading=lambda: True, annotate=lambda annotations: written.update(annotations))
    own.wake = lambda: woken.append(1)
    assert own.owns(key)
    own.observe(InformerEvent(MODIFIED, GADGET, obj, obj))
    assert woken and not own.owns(key)  # stopped at once, before letting go
    own.step(("a",))
    assert shards.labels()["d"] == {}  # both labels removed (the release)
    assert written[KEYS] == "0" and written[PENDING] == "1" and written[CACHED] == "1"
    gone = {**obj, "metadata": {**obj["metadata"], "labels": {}}}
    own.observe(InformerEvent(DELETED, GADGET, gone, obj))  # out of the selector: no longer draining
    assert own.owned == 1 and own.releases == 1


def test_an_object_leaving_the_selector_is_not_a_deletion_but_a_real_one_is(kapi, namespace):
    shards = Shards(kapi, namespace)
    shards.live("a")
    kinds = KindMap.of([GadgetReconciler()])
    held: set[str] = set()
    own = ownership(kapi, shards, "a", cached=lambda k: k in held)
    handoff = ShardHandoff(own, [PREFIX])
    router = EventRouter(handoff, kinds, SimpleNamespace(key_for_uid=lambda kind, uid: None), mirror=True,
                         object_cache=True, archive=None, observe=own.observe)

    def routed(event) -> tuple[list, list, list]:
        router.handle(event)
        objects, keys = handoff.take_objects_and_keys(10)
        return list(objects), keys, [(u.uid, u.deleted) for u in handoff.take_mirror(10)]

    ours = {OWNER: "a"}
    left = kube.create_object(kapi, GADGET, gadget(namespace, "left", mode="ok"))
    stale = {**left, "metadata": {**left["metadata"], "labels": ours}}
    # left the selector (the label now another shard's): nothing handed off
    moved = {**left, "metadata": {**left["metadata"], "labels": {OWNER: "b"}}}
    assert routed(InformerEvent(DELETED, GADGET, moved, stale)) == ([], [], [])
    # a re-list's made-up DELETED of an object that is still there (under another label): nothing either
    assert routed(InformerEvent(DELETED, GADGET, stale, stale, relisted=True)) == ([], [], [])
    # a real deletion of an object that still carries our label: recorded by this shard
    key = f"{PREFIX}{namespace}/left"
    uid = left["metadata"]["uid"]
    assert routed(InformerEvent(DELETED, GADGET, stale, stale)) == ([key], [key], [(uid, True)])
    # a re-list's DELETED of an object that is gone: a real deletion too
    kube.delete_object(kapi, GADGET, namespace, "left")
    wait_for(lambda: kube.get_object(kapi, GADGET, namespace, "left") is None)
    assert routed(InformerEvent(DELETED, GADGET, stale, stale, relisted=True)) == ([key], [key], [(uid, True)])
    # an object our informer holds is acted on; one it does not, not
    other = f"{PREFIX}{namespace}/other"
    held.add(other)
    assert own.owns(other) and not own.owns(f"{PREFIX}{namespace}/another")
    assert shard_selector("a") == f"{OWNER}=a"


class Listed:
    """A sharder informer that has listed: what `present` reads."""

    def __init__(self, keys, uids):
        self._keys, self._uids = keys, uids
        self.listed_at = datetime(2026, 12, 7, tzinfo=UTC)
        self.synced = threading.Event()
        self.synced.set()

    def keys(self):
        return list(self._keys)

    def uids(self):
        return set(self._uids)


def test_the_sweep_and_the_prune_of_the_reconciled_kinds_read_the_sharders_view_only_where_it_runs(kapi, namespace):
    shards = Shards(kapi, namespace)
    leading = {"now": True}
    sharder = Sharder(kapi, KindMap.of([GadgetReconciler()]), ownership(kapi, shards, "a"), shards.members,
                      leading=lambda: leading["now"], sweep=lambda kid, at: None)
    sharder.informers = {kind_id(GADGET): Listed([f"{PREFIX}ns/g1", f"{PREFIX}ns/g2"], {"u1", "u2"})}
    swept, pruned = [], []
    sweep = sharder.mirror_sweep(lambda rec, present, ns, at: swept.append((present, at)) or ["gone"])
    prune = sharder.cache_prune(lambda prefix, present: pruned.append((prefix, present)),
                                {PREFIX: kind_id(GADGET)})
    # what the shard's own (filtered) informer passes is not what is swept: the sharder's whole view is
    assert sweep(GadgetReconciler(), {"u1"}, None, None) == ["gone"]
    assert swept == [({"u1", "u2"}, datetime(2026, 12, 7, tzinfo=UTC))]
    prune(PREFIX, [f"{PREFIX}ns/g1"])
    prune("apps/v1/deployments/", ["apps/v1/deployments/ns/d"])  # a child kind: as given (watched whole)
    assert pruned == [(PREFIX, [f"{PREFIX}ns/g1", f"{PREFIX}ns/g2"]),
                      ("apps/v1/deployments/", ["apps/v1/deployments/ns/d"])]
    leading["now"] = False  # not the replica that runs the cluster-wide work: nothing swept or pruned
    swept.clear(), pruned.clear()  # noqa: B018
    assert sweep(GadgetReconciler(), {"u1"}, None, None) == []
    prune(PREFIX, [f"{PREFIX}ns/g1"])
    assert swept == [] and pruned == []


@pytest.mark.parametrize(("args", "named"), [
    (["--shard", "a", "--shard-informers", "some"], "invalid choice: 'some'"),
])
def test_runcontroller_refuses_a_bad_informers_mode(args, named):
    with pytest.raises(CommandError, match=re.escape(named)):
        call_command("runcontroller", *args)
