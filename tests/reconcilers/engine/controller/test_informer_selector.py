"""An informer with a label selector against a real kubesim (a controller shard's own objects,
reconcilers/engine/shards/labels.py): it lists and watches only the objects the selector matches, an object that
leaves it is reported DELETED with its new state, one that enters it ADDED, and a re-list's made-up DELETED says it
was made up (`relisted`), which a watched deletion does not."""

from __future__ import annotations

import threading

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller.informer import Informer
from tests.reconcilers.engine.controller.kinds import WIDGET, widget

OWNER = "shard.opsconsole.io/owner"


class Events:
    def __init__(self):
        self.events, self.lock = [], threading.Lock()

    def __call__(self, event):
        with self.lock:
            self.events.append(event)

    def of(self, etype, name):
        with self.lock:
            return [e for e in self.events if e.type == etype and e.obj["metadata"]["name"] == name]


def labelled(ns: str, name: str, owner: str | None) -> dict:
    body = widget(name, ns)
    if owner is not None:
        body["metadata"]["labels"] = {OWNER: owner}
    return body


def relabel(api, ns: str, name: str, owner: str | None) -> None:
    kube.patch_object(api, WIDGET, ns, name, {"metadata": {"labels": {OWNER: owner}}})


def test_a_selector_lists_and_watches_only_the_matching_objects_in_and_out(api, widget_kind, ns):
    for name, owner in (("mine", "a"), ("theirs", "b"), ("none", None)):
        kube.create_object(api, WIDGET, labelled(ns, name, owner))
    seen = Events()
    informer = Informer(api, WIDGET, seen, namespace=ns, label_selector=f"{OWNER}=a").start()
    try:
        assert informer.synced.wait(10)
        assert [e.obj["metadata"]["name"] for e in seen.events] == ["mine"]
        assert informer.keys() == [WIDGET.request(ns, "mine").key()]

        relabel(api, ns, "mine", "b")  # leaves the selector: DELETED, with the object as it is now
        relabel(api, ns, "theirs", "a")  # enters it: ADDED
        wait_for(lambda: seen.of("DELETED", "mine") and seen.of("ADDED", "theirs"), timeout=10)
        left = seen.of("DELETED", "mine")[0]
        assert left.obj["metadata"]["labels"][OWNER] == "b" and not left.relisted
        assert informer.keys() == [WIDGET.request(ns, "theirs").key()]

        kube.delete_object(api, WIDGET, ns, "theirs")  # a deletion the watch saw: not made up
        wait_for(lambda: seen.of("DELETED", "theirs"), timeout=10)
        gone = seen.of("DELETED", "theirs")[0]
        assert gone.obj["metadata"]["labels"][OWNER] == "a" and not gone.relisted
    finally:
        informer.stop()


def test_a_relist_says_which_deletions_it_made_up(api, widget_kind, ns):
    kube.create_object(api, WIDGET, labelled(ns, "moved", "a"))
    kube.create_object(api, WIDGET, labelled(ns, "deleted", "a"))
    seen = Events()
    informer = Informer(api, WIDGET, seen, namespace=ns, label_selector=f"{OWNER}=a")
    informer.relist()
    assert sorted(e.obj["metadata"]["name"] for e in seen.events) == ["deleted", "moved"]
    relabel(api, ns, "moved", None)  # both gone from the selector while nobody watched
    kube.delete_object(api, WIDGET, ns, "deleted")
    informer.relist()
    made_up = [e for e in seen.events if e.type == "DELETED"]
    assert sorted(e.obj["metadata"]["name"] for e in made_up) == ["deleted", "moved"]
    assert all(e.relisted for e in made_up)
    assert all(e.obj["metadata"]["labels"][OWNER] == "a" for e in made_up)  # the last state the cache kept
    assert informer.keys() == []
