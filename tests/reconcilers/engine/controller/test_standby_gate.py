"""The hot standby's gate with fake informers: closed, it routes nothing and remembers only the events after each
informer's first list, within its window; the takeover replays those, hands off the objects whose resourceVersion the
record lacks (every object when an informer had not listed, or when the record cannot be read) and opens."""

from __future__ import annotations

import threading

from reconcilers.engine.controller.events import InformerEvent
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.kindmap import KindMap, kind_id
from reconcilers.engine.controller.standby import StandbyGate
from tests.reconcilers.engine.controller.kinds import WIDGET, WidgetReconciler, widget


class FakeInformer:
    def __init__(self, kind, objects):
        self.kind, self.objects, self.synced = kind, dict(objects), threading.Event()
        self.listed_at = None

    def keys(self):
        return list(self.objects)

    def get(self, key):
        return self.objects.get(key)


class FakeInformers:
    def __init__(self, informers):
        self.informers, self.events_informer = informers, None

    def all(self):
        return list(self.informers.values())


class FakeRouter:
    def __init__(self, handoff):
        self.handoff, self.routed, self.listed_kinds = handoff, [], []

    def handle(self, event):
        self.routed.append(event)
        self.handoff.put_key(event.key)

    def handle_event(self, event):
        self.routed.append(event)

    def listed(self, informer):
        self.listed_kinds.append(informer.kind.kind)


def _obj(name, rv, uid=None):
    obj = widget(name, "ns", size=1)
    obj["metadata"].update(uid=uid or f"uid-{name}", resourceVersion=rv)
    return obj


def _gate(versions, now, object_cache=False):
    objects = {f"test.opsconsole.io/v1/widgets/ns/{n}": _obj(n, "1") for n in ("a", "b", "c")}
    informer = FakeInformer(WIDGET, objects)
    handoff = Handoff()
    router = FakeRouter(handoff)
    gate = StandbyGate(router, handoff, KindMap.of([WidgetReconciler()]),
                       FakeInformers({kind_id(WIDGET): informer}), versions=versions, mirror=False,
                       object_cache=object_cache, clock=lambda: now[0])
    gate.window = 10.0
    return gate, informer, router, handoff


def test_closed_it_routes_nothing_and_remembers_only_events_after_the_first_list_within_the_window():
    now = [100.0]
    gate, informer, router, handoff = _gate(lambda r: {"uid-a": "1", "uid-b": "1", "uid-c": "1"}, now)
    gate.handle(InformerEvent("ADDED", WIDGET, _obj("a", "1")))  # the first list: not remembered
    informer.synced.set()
    gate.handle(InformerEvent("MODIFIED", WIDGET, _obj("b", "2"), _obj("b", "1")))  # too old by the takeover
    now[0] = 115.0
    gate.handle(InformerEvent("MODIFIED", WIDGET, _obj("c", "2"), _obj("c", "1")))
    gate.listed(informer)
    assert router.routed == [] and router.listed_kinds == [] and handoff.pending()[0] == 0
    now[0] = 118.0
    assert gate.take_over() == (1, 0)
    assert [e.obj["metadata"]["name"] for e in router.routed] == ["c"] and router.listed_kinds == ["Widget"]
    gate.handle(InformerEvent("MODIFIED", WIDGET, _obj("a", "3"), _obj("a", "1")))  # open: routed at once
    assert [e.obj["metadata"]["name"] for e in router.routed] == ["c", "a"]


def test_the_takeover_hands_off_what_the_record_does_not_have():
    gate, informer, router, handoff = _gate(lambda r: {"uid-a": "1", "uid-b": "0"}, [0.0],  # b stale, c missing
                                            object_cache=True)
    informer.synced.set()
    assert gate.take_over() == (0, 2)
    objects, keys = handoff.take_objects_and_keys(10)
    assert sorted(k.rsplit("/", 1)[1] for k in keys) == ["b", "c"]
    # the informer's copies are slim (no managedFields): their cache entries are dropped so the runs GET them whole
    assert objects == {key: None for key in keys}


def test_an_informer_still_listing_or_an_unreadable_record_makes_every_object_changed():
    gate, informer, router, handoff = _gate(lambda r: {"uid-a": "1", "uid-b": "1", "uid-c": "1"}, [0.0])
    assert gate.take_over() == (0, 3)  # not synced: what it listed so far was never routed

    def unreadable(reconciler):
        raise ConnectionError("database away")

    gate, informer, router, handoff = _gate(unreadable, [0.0])
    informer.synced.set()
    assert gate.take_over() == (0, 3)
