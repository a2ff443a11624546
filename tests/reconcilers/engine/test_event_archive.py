"""The Events archive's writer and owner resolver (healing.archive) with a fake API, and the controller's archive
step with a fake writer: filing through controller ownerReferences, the cache, dedup by (uid, count), occurrences,
one INSERT per batch, a failing database keeping the batch."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reconcilers.engine import kube
from reconcilers.engine.controller.events import ADDED, DELETED, MODIFIED, InformerEvent
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.loop import (
    ARCHIVE_MAX_ATTEMPTS,
    ARCHIVE_YIELD_MAX_SECONDS,
    EVENTS,
    Controller,
)
from reconcilers.engine.controller.wiring import build_controller
from reconcilers.engine.healing.archive import LIST_AT, LIST_PAGE_MIN, ObjectRef, OwnerResolver, events_archive
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.models import HealingAction, HealingRecord, KubeEvent, Resource

NS = "shop"


def _ref(kind: str, name: str, uid: str, api_version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}


OBJECTS: dict[str, dict[str, Any]] = {
    "pod-1": {"metadata": {"uid": "pod-1", "ownerReferences": [_ref("ReplicaSet", "web-abc", "rs-1", "apps/v1")]}},
    "rs-1": {"metadata": {"uid": "rs-1", "ownerReferences": [_ref("Deployment", "web", "dep-1", "apps/v1")]}},
    "dep-1": {"metadata": {"uid": "dep-1", "ownerReferences": [
        {**_ref("Memcached", "web", "mc-1", "cache.example.com/v1alpha1"), "controller": False},  # not the controller
        _ref("Memcached", "web", "mc-1", "cache.example.com/v1alpha1")]}},
    "lonely": {"metadata": {"uid": "lonely"}},
}


class FakeApi:
    """Objects by uid (the resolver's `get`), counting reads."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def __call__(self, ref: ObjectRef) -> dict[str, Any] | None:
        self.reads.append(ref.uid)
        return OBJECTS.get(ref.uid)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def event(uid: str, count: int = 1, *, involved: tuple[str, str, str] = ("Pod", "web-abc-1", "pod-1"),
          type_: str = "Warning", reason: str = "Failed") -> dict[str, Any]:
    kind, name, involved_uid = involved
    return {
        "metadata": {"uid": uid, "name": f"{name}.{uid}", "namespace": NS,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "involvedObject": {"apiVersion": "v1", "kind": kind, "name": name, "namespace": NS, "uid": involved_uid},
        "type": type_, "reason": reason, "message": f'Failed to pull image "memcached:broken" ({count})',
        "count": count, "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": f"2026-01-01T00:00:{count:02d}Z",
        "source": {"component": "kubelet"},
    }


@pytest.fixture
def memcached(db) -> Resource:
    return Resource.objects.create(uid="mc-1", key=f"cache.example.com/v1alpha1/memcacheds/{NS}/web",
                                   group="cache.example.com", version="v1alpha1", plural="memcacheds", kind="Memcached",
                                   namespace=NS, name="web")


@pytest.fixture
def fake_api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def resolver(fake_api) -> OwnerResolver:
    return OwnerResolver(None, get=fake_api, clock=Clock())


def test_a_pod_is_walked_up_to_its_registered_root_and_the_second_time_costs_no_api_call(memcached, resolver,
                                                                                          fake_api) -> None:
    pod = ObjectRef("v1", "Pod", NS, "web-abc-1", "pod-1")
    assert resolver.resolve([pod]) == {"pod-1": memcached.pk}
    assert fake_api.reads == ["pod-1", "rs-1", "dep-1"]
    assert resolver.resolve([pod, ObjectRef("apps/v1", "ReplicaSet", NS, "web-abc", "rs-1")]) == {
        "pod-1": memcached.pk, "rs-1": memcached.pk}
    assert fake_api.reads == ["pod-1", "rs-1", "dep-1"]  # every object on the way was cached


def _burst(n: int) -> dict[str, dict[str, Any]]:
    """n Deployments' ReplicaSets and Pods, as after a burst: each Pod owned by its ReplicaSet, owned by dep-1's
    kin (the Deployment of a registered object, known to the resolver from the informer)."""
    objects: dict[str, dict[str, Any]] = {}
    for i in range(n):
        objects[f"b-rs-{i}"] = {"metadata": {"uid": f"b-rs-{i}", "name": f"web-{i}-abc",
                                             "ownerReferences": [_ref("Deployment", "web", "dep-1", "apps/v1")]}}
        objects[f"b-pod-{i}"] = {"metadata": {"uid": f"b-pod-{i}", "name": f"web-{i}-abc-1", "ownerReferences": [
            _ref("ReplicaSet", f"web-{i}-abc", f"b-rs-{i}", "apps/v1")]}}
    return objects


class Lister:
    """The resolver's `list_page` over `objects` (by kind, from the uid's prefix), recording each call."""

    def __init__(self, objects: dict[str, dict[str, Any]], status: int = 0, leave_out: str = "") -> None:
        self.objects, self.status, self.leave_out = objects, status, leave_out
        self.calls: list[tuple[str, str, int]] = []

    def __call__(self, ref: ObjectRef, limit: int) -> list[dict[str, Any]]:
        self.calls.append((ref.kind, ref.namespace, limit))
        if self.status:
            raise kube.ApiException(status=self.status, reason="Forbidden")
        prefix = "b-pod-" if ref.kind == "Pod" else "b-rs-"
        return [o for uid, o in self.objects.items() if uid.startswith(prefix) and uid != self.leave_out][:limit]


def _burst_resolver(objects: dict[str, dict[str, Any]], lister: Lister) -> tuple[OwnerResolver, list[str]]:
    gets: list[str] = []

    def get(ref: ObjectRef) -> dict[str, Any] | None:
        gets.append(ref.uid)
        return objects.get(ref.uid)

    resolver = OwnerResolver(None, get=get, list_page=lister, clock=Clock())
    resolver.remember("dep-1", "mc-1")  # the informer's hint: the Deployment is the registered object's
    return resolver, gets


def test_a_burst_s_pods_and_replicasets_are_read_with_one_list_each_not_a_get_each(memcached) -> None:
    n = LIST_AT * 3
    objects = _burst(n)
    lister = Lister(objects)
    resolver, gets = _burst_resolver(objects, lister)
    pods = [ObjectRef("v1", "Pod", NS, f"web-{i}-abc-1", f"b-pod-{i}") for i in range(n)]
    with CaptureQueriesContext(connection) as queries:
        assert resolver.resolve(pods) == {f"b-pod-{i}": memcached.pk for i in range(n)}
    assert gets == []
    assert lister.calls == [("Pod", NS, LIST_PAGE_MIN), ("ReplicaSet", NS, LIST_PAGE_MIN)]
    assert resolver.api_calls == 2
    assert len(queries) <= 4  # the mirror looked up per hop, not per ReplicaSet
    assert resolver.resolve([ObjectRef("apps/v1", "ReplicaSet", NS, "web-0-abc", "b-rs-0")]) == {
        "b-rs-0": memcached.pk}  # cached on the way
    assert resolver.api_calls == 2


def test_fewer_unknown_objects_than_list_at_are_read_one_by_one(memcached) -> None:
    objects = _burst(LIST_AT - 1)
    lister = Lister(objects)
    resolver, gets = _burst_resolver(objects, lister)
    pods = [ObjectRef("v1", "Pod", NS, f"web-{i}-abc-1", f"b-pod-{i}") for i in range(LIST_AT - 1)]
    assert resolver.resolve(pods) == {f"b-pod-{i}": memcached.pk for i in range(LIST_AT - 1)}
    assert lister.calls == [] and len(gets) == 2 * (LIST_AT - 1)  # each Pod and its ReplicaSet


def test_a_list_not_granted_or_missing_an_object_leaves_it_to_its_get(memcached) -> None:
    n = LIST_AT + 1
    objects = _burst(n)
    resolver, gets = _burst_resolver(objects, Lister(objects, status=403))
    pods = [ObjectRef("v1", "Pod", NS, f"web-{i}-abc-1", f"b-pod-{i}") for i in range(n)]
    assert resolver.resolve(pods) == {f"b-pod-{i}": memcached.pk for i in range(n)}
    assert len(gets) == 2 * n  # forbidden: every object read on its own, as before
    lister = Lister(objects, leave_out="b-pod-3")
    resolver, gets = _burst_resolver(objects, lister)
    assert resolver.resolve(pods) == {f"b-pod-{i}": memcached.pk for i in range(n)}
    assert gets == ["b-pod-3"]  # the one the page lacked; its ReplicaSet came with the ReplicaSets' list
    with pytest.raises(kube.ApiException):  # the API in trouble: the batch is tried again later
        _burst_resolver(objects, Lister(objects, status=500))[0].resolve(pods)


def test_the_registered_object_itself_resolves_without_any_api_call(memcached, resolver, fake_api) -> None:
    assert resolver.resolve([ObjectRef("cache.example.com/v1alpha1", "Memcached", NS, "web", "mc-1")]) == {
        "mc-1": memcached.pk}
    assert fake_api.reads == []


def test_an_object_leading_nowhere_is_cached_negative_until_its_ttl(memcached, fake_api) -> None:
    clock = Clock()
    resolver = OwnerResolver(None, get=fake_api, clock=clock, negative_ttl=60)
    lonely = ObjectRef("v1", "Pod", NS, "lonely", "lonely")
    assert resolver.resolve([lonely]) == {}
    assert resolver.resolve([lonely]) == {}
    assert fake_api.reads == ["lonely"]
    clock.now += 61
    assert resolver.resolve([lonely]) == {}
    assert fake_api.reads == ["lonely", "lonely"]


def test_a_forbidden_read_leads_nowhere_and_a_failing_api_raises_for_a_retry(memcached) -> None:
    def forbidden(ref):
        raise kube.ApiException(status=403, reason="Forbidden")

    def down(ref):
        raise kube.ApiException(status=503, reason="Unavailable")

    pod = ObjectRef("v1", "Pod", NS, "web-abc-1", "pod-1")
    assert OwnerResolver(None, get=forbidden, clock=Clock()).resolve([pod]) == {}
    resolver = OwnerResolver(None, get=down, clock=Clock())
    with pytest.raises(kube.ApiException):
        resolver.resolve([pod])
    assert resolver.cached("pod-1") == (False, None)  # nothing remembered: the next batch asks again


def test_the_cache_is_bounded_least_recently_used_first(fake_api) -> None:
    resolver = OwnerResolver(None, get=fake_api, clock=Clock(), max_entries=2)
    resolver.remember("a", "root")
    resolver.remember("b", None)
    assert resolver.cached("a") == (True, "root")
    resolver.remember("c", "root")
    assert len(resolver) == 2 and resolver.cached("b") == (False, None) and resolver.cached("a")[0]


def test_the_same_observation_twice_is_one_row_and_occurrences_count_from_what_was_archived(memcached,
                                                                                            resolver) -> None:
    assert events_archive([(event("e1", 1), None)], resolver) == 1
    assert events_archive([(event("e1", 1), None)], resolver) == 0
    assert events_archive([(event("e1", 3), event("e1", 2))], resolver) == 1  # the watch saw 2 and 3
    # a controller that restarted has no previous state: the archive's own counts decide what is new
    assert events_archive([(event("e1", 6), None)], resolver) == 1
    rows = list(KubeEvent.objects.filter(event_uid="e1").order_by("count").values_list("count", "occurrences"))
    assert rows == [(1, 1), (3, 2), (6, 1)]  # 4 and 5 were never seen: one observation, one occurrence
    row = KubeEvent.objects.get(event_uid="e1", count=6)
    assert (row.resource_id, row.involved_kind, row.involved_name, row.type, row.source) == (
        memcached.pk, "Pod", "web-abc-1", "Warning", "kubelet")
    assert row.last_timestamp.isoformat() == "2026-01-01T00:00:06+00:00"


def test_an_event_first_seen_at_count_five_counts_the_states_the_watch_saw(memcached, resolver) -> None:
    # its earlier counts were never archived (before the controller ran, or while the pod led nowhere yet): the
    # Event's own count is not evidence, the two states the informer delivered (4, then 5) are
    events_archive([(event("e2", 5), event("e2", 4))], resolver)
    assert KubeEvent.objects.get(event_uid="e2").occurrences == 2


def test_a_batch_is_one_insert_and_events_filed_nowhere_are_dropped(memcached, resolver) -> None:
    batch = [(event(f"e{i}", 1), None) for i in range(20)]
    batch.append((event("x", 1, involved=("Pod", "lonely", "lonely")), None))
    with CaptureQueriesContext(connection) as queries:
        assert events_archive(batch, resolver) == 20
    inserts = [q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 1
    assert KubeEvent.objects.count() == 20 and not KubeEvent.objects.filter(event_uid="x").exists()
    # steady state: the cache answers, so a batch costs the mirror query, the counts query and the INSERT
    with CaptureQueriesContext(connection) as queries:
        events_archive([(event(f"e{i}", 2), None) for i in range(20)], resolver)
    assert len(queries.captured_queries) <= 4


def test_events_of_a_deleted_resource_are_still_filed_under_it(memcached, resolver) -> None:
    Resource.objects.filter(pk=memcached.pk).update(deleted=True)
    assert events_archive([(event("e3", 1), None)], resolver) == 1


# -- the controller's step ---------------------------------------------------------------------------------


class Writer:
    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.batches: list[list] = []

    def __call__(self, batch: list) -> int:
        self.batches.append(batch)
        if self.fail:
            self.fail -= 1
            raise DatabaseError("the database is away")
        return len(batch)


def _controller(writer: Writer, clock: Clock) -> Controller:
    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: 0, mirror=False,
                                  archive_events=True, events_write=writer, clock=clock, batch_size=3)
    controller.running = True
    return controller


def test_the_handoff_coalesces_an_event_per_uid_keeping_the_newest_and_is_bounded() -> None:
    handoff = Handoff(max_events=2)
    handoff.put_event("a", (event("a", 1), None))
    handoff.put_event("a", (event("a", 2), event("a", 1)))
    handoff.put_event("b", (event("b", 1), None))
    handoff.put_event("c", (event("c", 1), None))
    assert handoff.events_dropped == 1
    taken = handoff.take_events(10)
    assert [uid for uid, _ in taken] == ["b", "c"]


def test_deleted_events_are_not_handed_to_the_archive() -> None:
    controller = _controller(Writer(), Clock())
    controller.handle_event(InformerEvent(ADDED, EVENTS, event("a", 1)))
    controller.handle_event(InformerEvent(MODIFIED, EVENTS, event("a", 2), event("a", 1)))
    controller.handle_event(InformerEvent(DELETED, EVENTS, event("b", 1)))
    assert [(uid, pair[0]["count"], pair[1]) for uid, pair in controller.handoff.take_events(10)] == [("a", 2, None)]


def test_a_failing_database_keeps_the_batch_backs_off_then_writes_one_by_one() -> None:
    writer, clock = Writer(fail=ARCHIVE_MAX_ATTEMPTS + 1), Clock()
    controller = _controller(writer, clock)
    for i in range(5):
        controller.handle_event(InformerEvent(ADDED, EVENTS, event(f"e{i}", 1)))
    assert controller._archive_events() is False
    assert controller.handoff.events_pending() == 5  # kept
    assert controller._archive_events() is False and len(writer.batches) == 1  # pausing: no spin
    for _ in range(ARCHIVE_MAX_ATTEMPTS - 2):
        clock.now += 60
        assert controller._archive_events() is False
    assert controller.handoff.events_pending() == 5
    clock.now += 60
    assert controller._archive_events() is True  # the last attempt: one by one; the first still fails
    assert controller.events_dropped == 1 and controller.events_archived == 2
    assert controller._archive_events() is True and controller.events_archived == 4  # the rest, as a batch
    assert controller.handoff.events_pending() == 0


def test_the_archive_yields_while_keys_wait_for_a_worker_for_a_bounded_time_and_backlog() -> None:
    """In a burst (keys wait for a worker, as the controller's depth sample says) the archive lets its rounds pass:
    the reconciles come first. It still archives once it has yielded ARCHIVE_YIELD_MAX_SECONDS in a row, and at
    once when the Events waiting reach a quarter of the handoff's bound, so a long burst drops none."""
    writer, clock = Writer(), Clock()
    depth = {"pending": 5}

    class Depth:
        @property
        def pending(self) -> int:
            return depth["pending"]

    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: 0, mirror=False, archive_events=True,
                                  events_write=writer, clock=clock, batch_size=3, queue_depths=lambda: {"k": Depth()})
    controller.running = True
    controller.handle_event(InformerEvent(ADDED, EVENTS, event("e0", 1)))
    controller._queue_metrics()
    assert controller._archive_events() is False and writer.batches == []
    clock.now += ARCHIVE_YIELD_MAX_SECONDS - 1
    assert controller._archive_events() is False and writer.batches == []
    clock.now += 1
    assert controller._archive_events() is True and len(writer.batches) == 1  # yielded long enough
    controller.handle_event(InformerEvent(ADDED, EVENTS, event("e1", 1)))
    assert controller._archive_events() is False  # a new round of yielding
    depth["pending"] = 0  # the burst is over: the next depth sample lets the archive go
    controller._queue_metrics()
    assert controller._archive_events() is True and len(writer.batches) == 2
    depth["pending"] = 5
    controller._queue_metrics()
    controller.handoff.max_events = 8
    for i in range(2, 4):
        controller.handle_event(InformerEvent(ADDED, EVENTS, event(f"e{i}", 1)))
    assert controller._archive_events() is True  # a quarter of the bound waits: no yielding
    assert controller.archive_yields == 3 and controller.handoff.events_dropped == 0


def test_the_informers_tell_the_resolver_whose_child_an_owned_object_is(memcached, fake_api) -> None:
    from reconcilers.kinds.memcached import DEPLOYMENT, MemcachedReconciler

    resolver = OwnerResolver(None, get=fake_api, clock=Clock())

    def writer(batch: list) -> int:
        return len(batch)

    writer.resolver = resolver  # type: ignore[attr-defined]
    controller = build_controller(None, [MemcachedReconciler()], enqueue=lambda key: True, pump=lambda: 0, mirror=False,
                                  archive_events=True, events_write=writer, clock=Clock())
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": NS, "uid": "dep-1",
                               "ownerReferences": [_ref("Memcached", "web", "mc-1", "cache.example.com/v1alpha1")]}}
    stranger = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "other", "namespace": NS, "uid": "dep-9",
                             "ownerReferences": [_ref("Rollout", "other", "ro-1", "argoproj.io/v1alpha1")]}}
    controller.handle(InformerEvent(ADDED, DEPLOYMENT, deployment))
    controller.handle(InformerEvent(ADDED, DEPLOYMENT, stranger))
    assert resolver.cached("dep-1") == (True, "mc-1") and resolver.cached("dep-9") == (False, None)
    pod = ObjectRef("v1", "Pod", NS, "web-abc-1", "pod-1")
    assert resolver.resolve([pod]) == {"pod-1": memcached.pk}
    assert fake_api.reads == ["pod-1", "rs-1"]  # the Deployment came from the informer, not a GET


def test_a_pod_whose_replicaset_was_resolved_in_an_earlier_batch_is_still_filed(memcached, resolver,
                                                                                fake_api) -> None:
    rs = ObjectRef("apps/v1", "ReplicaSet", NS, "web-abc", "rs-1")
    assert resolver.resolve([rs]) == {"rs-1": memcached.pk}  # one batch: the ReplicaSet's Event
    pod = ObjectRef("v1", "Pod", NS, "web-abc-1", "pod-1")
    assert resolver.resolve([pod]) == {"pod-1": memcached.pk}  # the next: its Pod's, ending at a cached owner
    assert fake_api.reads == ["rs-1", "dep-1", "pod-1"]


def test_events_waiting_for_the_archive_thread_do_not_make_the_main_loop_spin() -> None:
    clock = Clock()
    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: 0, mirror=False, archive_events=True,
                                  events_write=Writer(), clock=clock, background=True)
    controller.running = True
    controller._next_pump = clock() + 0.2  # noqa: SLF001 - the next pump is due in 0.2 s
    controller.handle_event(InformerEvent(ADDED, EVENTS, event("a", 1)))
    assert controller.handoff.events_pending()
    assert controller._sleep_budget() == pytest.approx(0.2)  # noqa: SLF001 - the archive thread's work, not ours
    inline = _controller(Writer(), clock)  # archiving inline (tests, no background threads): due at once
    inline._next_pump = clock() + 0.2  # noqa: SLF001
    inline.handle_event(InformerEvent(ADDED, EVENTS, event("b", 1)))
    assert inline._sleep_budget() == 0.0  # noqa: SLF001


def test_the_archive_thread_goes_again_at_once_only_while_a_full_batch_waits() -> None:
    """At a steady trickle the archive thread pauses ARCHIVE_IDLE_SECONDS between writes (one INSERT for what came
    meanwhile), not one write per Event; a backlog is written batch after batch."""
    writer = Writer()
    controller = _controller(writer, Clock())  # batch_size=3
    for i in range(7):
        controller.handle_event(InformerEvent(ADDED, EVENTS, event(f"e{i}", 1)))
    assert controller._archive_step() is True  # noqa: SLF001 - 3 written, a full batch still waits
    assert controller._archive_step() is False  # noqa: SLF001 - 3 more, one left: pause first
    assert controller._archive_step() is False  # noqa: SLF001 - the last one
    assert [len(b) for b in writer.batches] == [3, 3, 1]
    assert controller._archive_step() is False and len(writer.batches) == 3  # noqa: SLF001 - nothing waits


def test_an_event_written_in_another_namespace_is_not_filed_under_the_object_it_names(memcached, resolver) -> None:
    """kube-apiserver accepts an Event with eventTime in a namespace other than its regarding object's: a user of
    namespace `intruder` must not put Events into the history of `shop`'s Memcached."""
    forged = event("forged", 1, involved=("Memcached", "web", "mc-1"))
    forged["metadata"]["namespace"] = "intruder"
    forged["eventTime"] = "2026-01-01T00:00:00.000000Z"
    assert events_archive([(forged, None)], resolver) == 0
    own = event("own", 1, involved=("Memcached", "web", "mc-1"))
    assert events_archive([(own, None)], resolver) == 1
    assert list(KubeEvent.objects.values_list("event_uid", flat=True)) == ["own"]


# -- forged Events (issue 38): occurrences and times bounded by what the watch observed --------------------------


def _applied(resource: Resource) -> None:
    """Generation 1 of `resource` reconciled (observedGeneration 1) and its revision recorded a second ago."""
    from tests.reconcilers.engine.generations_support import revision_at

    Resource.objects.filter(pk=resource.pk).update(generation=1, observed_generation=1)
    revision_at(resource.uid, 1, timezone.now() - timedelta(seconds=1))


def forged(uid: str, count: int = 1000000) -> dict[str, Any]:
    """What anyone who may create Events in `shop` can write about the Memcached's Deployment."""
    made = event(uid, count, involved=("Deployment", "web", "dep-1"), reason="BackOff")
    made["involvedObject"]["apiVersion"] = "apps/v1"
    made["firstTimestamp"] = made["lastTimestamp"] = "2099-01-01T00:00:00Z"
    return made


def test_a_forged_event_with_a_huge_count_and_a_future_time_is_one_occurrence_seen_now(memcached, resolver) -> None:
    before = timezone.now()
    assert events_archive([(forged("f1"), None)], resolver) == 1
    row = KubeEvent.objects.get(event_uid="f1")
    assert row.resource_id == memcached.pk and row.count == 1000000
    assert row.occurrences == 1
    assert before <= row.first_timestamp <= row.last_timestamp <= timezone.now()  # never a future time


def test_a_count_jump_of_thousands_in_one_update_is_one_observation(memcached, resolver) -> None:
    events_archive([(event("j1", 1), None)], resolver)
    events_archive([(event("j1", 5000), event("j1", 1))], resolver)
    events_archive([(event("j1", 5002), event("j1", 5001))], resolver)  # two bumps the watch saw, coalesced
    rows = list(KubeEvent.objects.filter(event_uid="j1").order_by("count").values_list("count", "occurrences"))
    assert rows == [(1, 1), (5000, 1), (5002, 2)]


def test_a_forged_event_raises_no_anomaly_and_forged_ones_that_do_clear_when_their_window_passes(
        memcached, resolver) -> None:
    """One Event with count 1000000 and lastTimestamp 2099 raised `backoff`, still active long after its window:
    now it is one occurrence (below the threshold of 3); three of them do raise it, and it clears, on record,
    once they are older than the window as the controller saw them."""
    evaluator = Evaluator(None, [MemcachedReconciler()], annotations=lambda _rec, _res: {},
                          enqueue=lambda keys: None)
    _applied(memcached)  # generation 1, reconciled: Events about its Deployment are its evidence (issue 38)
    events_archive([(forged("f1"), None)], resolver)
    assert evaluator.step().detected == 0
    assert Resource.objects.get(pk=memcached.pk).active_anomalies == {}
    events_archive([(forged("f2"), None), (forged("f3"), None)], resolver)
    assert evaluator.step().detected == 1
    assert set(Resource.objects.get(pk=memcached.pk).active_anomalies) == {"backoff"}
    # nothing of the children's own state corroborates it: it may roll nothing back (issue 38)
    assert Resource.objects.get(pk=memcached.pk).active_anomalies["backoff"]["rollback_ok"] is False
    later = timezone.now() + timedelta(seconds=301)
    assert evaluator.step(now=later).cleared == 1
    assert Resource.objects.get(pk=memcached.pk).active_anomalies == {}
    cleared = HealingRecord.objects.get(resource=memcached, action=HealingAction.ANOMALY_CLEARED)
    assert cleared.rule == "backoff"
