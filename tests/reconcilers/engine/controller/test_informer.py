"""The informer against a real kubesim: list then watch, resume, re-list on 410, bookmarks."""

from __future__ import annotations

import threading

import pytest

from kubesim.testing import running_kubesim as kubesim_server
from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller.bootstrap import CRD, wait_for_crds
from reconcilers.engine.controller.informer import Informer
from tests.reconcilers.engine.controller.kinds import CONFIGMAP, NAMESPACE, WIDGET, crd, widget


class Recorder:
    """An informer handler that remembers (type, name, resourceVersion) of every event."""

    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def __call__(self, event):
        meta = event.obj["metadata"]
        with self.lock:
            self.events.append((event.type, meta["name"], meta.get("resourceVersion")))

    def seen(self, etype, name):
        with self.lock:
            return [e for e in self.events if e[0] == etype and e[1] == name]

    def clear(self):
        with self.lock:
            self.events.clear()


@pytest.fixture
def started():
    informers = []

    def start(informer):
        informers.append(informer.start())
        assert informer.synced.wait(10)
        return informer

    yield start
    for informer in informers:
        informer.stop()


def test_it_lists_then_watches_and_sees_adds_updates_and_deletes(api, widget_kind, ns, started):
    kube.create_object(api, WIDGET, widget("a", ns))
    kube.create_object(api, WIDGET, widget("b", ns))
    rec = Recorder()
    informer = started(Informer(api, WIDGET, rec, namespace=ns))
    assert sorted(e[1] for e in rec.events if e[0] == "ADDED") == ["a", "b"]
    assert informer.lists == 1
    listed_rv = informer.resource_version

    kube.create_object(api, WIDGET, widget("c", ns))
    kube.patch_object(api, WIDGET, ns, "a", {"spec": {"size": 2}})
    kube.delete_object(api, WIDGET, ns, "b")
    wait_for(lambda: rec.seen("ADDED", "c") and rec.seen("MODIFIED", "a") and rec.seen("DELETED", "b"))

    assert informer.watch_starts[0] == listed_rv  # the watch started where the list left off
    assert informer.lists == 1
    assert sorted(informer.keys()) == [WIDGET.request(ns, "a").key(), WIDGET.request(ns, "c").key()]
    assert informer.get(WIDGET.request(ns, "a").key())["spec"]["size"] == 2


def test_a_dropped_watch_resumes_from_the_last_resource_version(api, widget_kind, ns, started, kubesim_faults):
    kubesim_faults.set_faults(watch_cut_after=2)  # the server ends every watch after two events
    rec = Recorder()
    informer = started(Informer(api, WIDGET, rec, namespace=ns, min_backoff=0.01))
    created_rvs = []
    for i in range(7):
        created_rvs.append(kube.create_object(api, WIDGET, widget(f"w{i}", ns))["metadata"]["resourceVersion"])
    wait_for(lambda: len(rec.seen("ADDED", "w6")) == 1)

    added = [e for e in rec.events if e[0] == "ADDED"]
    assert [e[1] for e in added] == [f"w{i}" for i in range(7)]  # each once, in order: nothing missed or doubled
    assert informer.lists == 1  # resumed, never re-listed
    assert informer.watches >= 4
    starts = list(informer.watch_starts)[1:]
    assert all(int(rv) >= int(created_rvs[1]) for rv in starts[-1:])  # later watches start past what was seen
    assert [int(rv) for rv in starts] == sorted(int(rv) for rv in starts)


def test_bookmarks_move_the_resume_point_without_events(api, widget_kind, ns, started):
    rec = Recorder()
    informer = started(Informer(api, WIDGET, rec, namespace=ns))
    listed = int(informer.resource_version)
    kube.create_object(api, CONFIGMAP, {"metadata": {"name": "other", "namespace": ns}})  # another kind moves rv
    wait_for(lambda: int(informer.resource_version) > listed, timeout=5)
    assert rec.events == []


def test_a_watch_answered_410_relists_and_misses_nothing(api):
    # a kubesim of its own that keeps only 10 events: a watch from an older resourceVersion gets 410 Gone
    with kubesim_server(history_size=10, controllers=False) as small:
        api = kube.build_api_client(small.kubeconfig)
        try:
            definition = crd(WIDGET)
            kube.ensure_object(api, CRD, definition)
            wait_for_crds(api, [definition], timeout=10)
            kube.create_object(api, NAMESPACE, {"metadata": {"name": "gone"}})
            kube.create_object(api, WIDGET, widget("kept", "gone"))
            kube.create_object(api, WIDGET, widget("changed", "gone"))
            kube.create_object(api, WIDGET, widget("removed", "gone"))
            rec = Recorder()
            informer = Informer(api, WIDGET, rec, watch_timeout_seconds=1)
            informer.step()  # the list
            assert informer.lists == 1 and len(rec.events) == 3
            rec.clear()

            # while nobody watches: changes of all three sorts, then enough churn to push them out of history
            kube.create_object(api, WIDGET, widget("new", "gone"))
            kube.patch_object(api, WIDGET, "gone", "changed", {"spec": {"size": 5}})
            kube.delete_object(api, WIDGET, "gone", "removed")
            for i in range(12):
                kube.create_object(api, CONFIGMAP, {"metadata": {"name": f"churn{i}", "namespace": "gone"}})

            informer.step()  # the watch: ERROR 410 -> a re-list is needed
            assert informer.lists == 1 and rec.events == []
            informer.step()  # the re-list, diffed against the cache
            assert informer.lists == 2
            assert sorted(rec.events, key=lambda e: e[1]) == sorted([
                ("ADDED", "new", rec.seen("ADDED", "new")[0][2]),
                ("MODIFIED", "changed", rec.seen("MODIFIED", "changed")[0][2]),
                ("DELETED", "removed", rec.seen("DELETED", "removed")[0][2]),
            ], key=lambda e: e[1])
            assert informer.get(WIDGET.request("gone", "changed").key())["spec"]["size"] == 5
            assert not rec.seen("MODIFIED", "kept")

            # and it watches again from the new list
            rec.clear()
            informer.start()
            kube.create_object(api, WIDGET, widget("after", "gone"))
            wait_for(lambda: rec.seen("ADDED", "after"))
            informer.stop()
        finally:
            api.close()


def test_an_http_410_on_the_watch_request_relists(monkeypatch):
    calls = []

    def refuse(*args, **kwargs):
        calls.append(kwargs["resource_version"])
        raise kube.ApiException(status=410, reason="Gone")

    def lister(*args, **kwargs):
        return kube.ListResult([], "42")

    monkeypatch.setattr(kube, "watch_objects", refuse)
    monkeypatch.setattr(kube, "list_objects", lister)
    informer = Informer(object(), WIDGET, lambda ev: None)
    informer.step()
    informer.step()
    assert calls == ["42"] and informer._need_list
    informer.step()
    assert informer.lists == 2
