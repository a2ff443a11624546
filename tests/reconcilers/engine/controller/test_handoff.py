"""The handoff between informer threads and the controller loop."""

from __future__ import annotations

import threading

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.controller.handoff import Handoff, MirrorUpdate

KIND = ResourceKind("cache.example.com", "v1alpha1", "memcacheds", "Memcached")


def test_keys_are_coalesced_in_first_put_order():
    h = Handoff()
    for key in ["a", "b", "a", "c", "b"]:
        h.put_key(key)
    assert h.take_keys(2) == ["a", "b"]
    assert h.take_keys(10) == ["c"]
    assert h.take_keys(10) == []


def test_given_back_keys_go_first():
    h = Handoff()
    h.put_key("new")
    h.put_keys(["old1", "old2"])
    assert h.take_keys(10) == ["old1", "old2", "new"]


def test_mirror_updates_keep_the_newest_state_per_uid():
    h = Handoff()
    h.put_mirror(MirrorUpdate(KIND, "u1", {"v": 1}))
    h.put_mirror(MirrorUpdate(KIND, "u2", {"v": 1}))
    h.put_mirror(MirrorUpdate(KIND, "u1", {"v": 2}, deleted=True))
    taken = h.take_mirror(10)
    assert [(u.uid, u.obj["v"], u.deleted) for u in taken] == [("u2", 1, False), ("u1", 2, True)]


def test_mirror_updates_left_by_the_taker_stay_in_their_place():
    h = Handoff()
    for uid in ("u1", "u2", "u3"):
        h.put_mirror(MirrorUpdate(KIND, uid, {"v": 1}))
    looked = []

    def leave(update: MirrorUpdate) -> bool:
        looked.append(update.uid)
        return update.uid in ("u2", "u5")

    assert [u.uid for u in h.take_mirror(10, leave=leave)] == ["u1", "u3"]
    for uid in ("u4", "u5"):
        h.put_mirror(MirrorUpdate(KIND, uid, {"v": 1}))
    assert [u.uid for u in h.take_mirror(10, leave=leave)] == ["u4"]
    assert looked == ["u1", "u2", "u3", "u4", "u5"]  # each state looked at once: u2 was set aside
    assert h.pending() == (0, 2)
    h.put_mirror(MirrorUpdate(KIND, "u5", {"v": 2}))  # a newer state is looked at again
    assert h.take_mirror(10, leave=lambda u: False)[0].obj == {"v": 2}
    assert [u.uid for u in h.take_mirror(10)] == ["u2"]  # without `leave`: what was set aside goes
    assert h.pending() == (0, 0)


def test_a_put_from_another_thread_wakes_the_waiter():
    h = Handoff()
    h.wait(0)  # re-arm
    threading.Timer(0.05, h.put_key, args=["k"]).start()
    assert h.wait(5.0) is True
    assert h.take_keys(1) == ["k"]
    assert h.wait(0.01) is False


def test_many_threads_lose_no_key():
    h = Handoff()

    def put(n):
        for i in range(500):
            h.put_key(f"{n}-{i}")

    threads = [threading.Thread(target=put, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen = set()
    while batch := h.take_keys(300):
        seen.update(batch)
    assert len(seen) == 2000
