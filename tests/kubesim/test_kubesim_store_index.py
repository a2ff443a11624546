"""kubesim's store keeps indexes of the objects each controller owns and of their labels, through every write."""

from __future__ import annotations

from kubesim.store import Store

PODS = ("", "pods")


def pod(name: str, owner: str | None, ns: str = "default", *, controller: bool = True) -> dict:
    meta: dict = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "ReplicaSet", "name": "rs", "controller": controller}]
    return {"metadata": meta}


def names(objs: list[dict]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_controlled_by_follows_creates_owner_changes_and_deletes_in_name_order() -> None:
    store = Store()
    store.put(PODS, pod("b", "rs1"))
    store.put(PODS, pod("a", "rs1"))
    store.put(PODS, pod("c", "rs2"))
    store.put(PODS, pod("d", "rs1", controller=False))  # an owner that is not the controller does not count
    store.put(PODS, pod("e", "rs1", ns="other"))
    assert names(store.controlled_by(PODS, "default", "rs1")) == ["a", "b"]
    assert names(store.controlled_by(PODS, "other", "rs1")) == ["e"]

    store.put(PODS, pod("b", "rs2"))  # adopted by another controller
    assert names(store.controlled_by(PODS, "default", "rs1")) == ["a"]
    assert names(store.controlled_by(PODS, "default", "rs2")) == ["b", "c"]
    store.put(PODS, pod("a", None))  # orphaned
    store.remove(PODS, "default", "c")
    assert store.controlled_by(PODS, "default", "rs1") == []
    assert names(store.controlled_by(PODS, "default", "rs2")) == ["b"]


def test_loaded_and_unloaded_objects_are_indexed_too() -> None:
    store = Store()
    store.load(PODS, pod("a", "rs1"))
    store.load(PODS, pod("a", "rs2"))  # a journal replaying a later state of the same object
    assert store.controlled_by(PODS, "default", "rs1") == []
    assert names(store.controlled_by(PODS, "default", "rs2")) == ["a"]
    store.unload(PODS, "default", "a")
    assert store.controlled_by(PODS, "default", "rs2") == []


def labelled(name: str, labels: dict, ns: str = "default") -> dict:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}}


def test_the_label_index_follows_creates_label_changes_deletes_and_journal_replays() -> None:
    store = Store()
    store.put(PODS, labelled("b", {"app": "mc", "tier": "cache"}))
    store.put(PODS, labelled("a", {"app": "mc"}))
    store.put(PODS, labelled("c", {"app": "web"}))
    store.put(PODS, labelled("a", {"app": "mc"}, ns="other"))
    assert names(store.labelled(PODS, "default", "app", "mc")) == ["a", "b"]
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in store.labelled(PODS, None, "app", "mc")] \
        == [("default", "a"), ("default", "b"), ("other", "a")]
    assert store.count_labelled(PODS, "app", "mc") == 3

    store.put(PODS, labelled("b", {"app": "web"}))  # relabelled
    store.remove(PODS, "default", "a")
    assert names(store.labelled(PODS, "default", "app", "mc")) == []
    assert names(store.labelled(PODS, "default", "app", "web")) == ["b", "c"]
    assert names(store.labelled(PODS, "default", "tier", "cache")) == []
    store.load(PODS, labelled("d", {"app": "mc"}))
    assert names(store.labelled(PODS, "default", "app", "mc")) == ["d"]
    store.unload(PODS, "default", "d")
    assert store.count_labelled(PODS, "app", "mc") == 1  # the one in "other"
