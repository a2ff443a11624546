"""The handoff between informer threads and the controller loop."""

from __future__ import annotations

import sys
import threading

from bench.memory.measure import deep_size
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


def _heavy(name: str, rv: str = "1") -> dict:
    """An object with managedFields and a last-applied annotation: what the handoff must pass on whole."""
    return {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": rv,
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 200 + "}"},
                         "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"size": 3, "tags": ["a", "b"]}, "status": {"phase": "Running"}}


def test_waiting_objects_are_held_packed_and_taken_whole():
    """Issue 40: what waits is packed bytes (not the delivered dicts), and what is taken is equal to what was put,
    managedFields and annotations included, each a fresh dict."""
    h = Handoff()
    obj, event, before = _heavy("a"), {**_heavy("e"), "count": 2}, {**_heavy("e"), "count": 1}
    h.put_object("k/a", obj)
    h.put_object("k/gone", None)
    h.put_mirror(MirrorUpdate(KIND, "u-a", obj))
    h.put_event("u-e", (event, before))
    assert all(isinstance(v, bytes) for v in h._objects.values() if v is not None)
    assert all(isinstance(p.obj, bytes) for p in h._mirror.values())
    assert all(isinstance(p[0], bytes) and isinstance(p[1], bytes) for p in h._events.values())
    objects, _ = h.take_objects_and_keys(10)
    assert objects == {"k/a": obj, "k/gone": None} and objects["k/a"] is not obj
    [update] = h.take_mirror(10)
    assert (update.uid, update.obj, update.deleted) == ("u-a", obj, False)
    [(uid, (taken, previous))] = h.take_events(10)
    assert (uid, taken, previous) == ("u-e", event, before)


def test_given_back_objects_and_events_are_packed_again():
    h = Handoff()
    h.put_objects_back({"k/a": _heavy("a")})
    h.put_events_back([("u-e", (_heavy("e"), None))])
    assert isinstance(h._objects["k/a"], bytes) and h._events["u-e"][1] is None
    assert h.take_objects_and_keys(10)[0] == {"k/a": _heavy("a")}
    assert h.take_events(10) == [("u-e", (_heavy("e"), None))]


def _deployment(i: int) -> dict:
    """A Deployment as an API server returns it (many small fields, as real objects have)."""
    container = {"name": "memcached", "image": "memcached:1.6", "args": ["-m", "64", "-o", "modern"],
                 "ports": [{"containerPort": 11211, "name": "memcached", "protocol": "TCP"}],
                 "resources": {"limits": {"cpu": "100m", "memory": "128Mi"}}, "imagePullPolicy": "IfNotPresent",
                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"m{i}", "namespace": "default", "uid": f"uid-{i:08d}", "resourceVersion": str(i),
                         "generation": 1, "labels": {"app": "memcached", "memcached_cr": f"m{i}"},
                         "ownerReferences": [{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                                              "name": f"m{i}", "uid": f"owner-{i:08d}", "controller": True}],
                         "managedFields": [{"manager": "opsconsole", "operation": "Apply", "apiVersion": "apps/v1",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "memcached"}},
                     "template": {"metadata": {"labels": {"app": "memcached"}}, "spec": {"containers": [container]}}},
            "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 1,
                       "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}}


def test_a_burst_waits_in_a_fraction_of_the_memory_of_the_objects():
    """1,000 objects waiting for both the object cache and the mirror (packed once, the same bytes for both) hold
    less than a third of what the objects themselves held before."""
    objects = [_deployment(i) for i in range(1000)]
    h = Handoff()
    for obj in objects:
        h.put_object(obj["metadata"]["name"], obj)  # as the router does: the object, then its mirror update
        h.put_mirror(MirrorUpdate(KIND, obj["metadata"]["uid"], obj))
    assert all(h._objects[f"m{i}"] is h._mirror[f"uid-{i:08d}"].obj for i in range(1000))
    held = deep_size([h._objects]) + sum(sys.getsizeof(p) for p in h._mirror.values())
    assert held * 3 < deep_size(objects), (held, deep_size(objects))
