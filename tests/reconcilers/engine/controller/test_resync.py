"""The spread periodic resync (controller.resync): each cached key once per period, evenly spaced, a step never
O(N); a kind's own period; the full resync of every key at once. Driven by hand on fake caches and times."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import metrics
from reconcilers.engine.controller.kindmap import KindMap, kind_id
from reconcilers.engine.controller.resync import KindResync, ResyncSchedule, periods
from tests.reconcilers.engine.controller.kinds import GadgetReconciler, WidgetReconciler


class FakeCache:
    """An informer's cache: keys, membership, synced."""

    def __init__(self, keys=(), synced=True):
        self.objects = {k: {"k": k} for k in keys}
        self.synced = threading.Event()
        if synced:
            self.synced.set()
        self.listed = 0

    def keys(self):
        self.listed += 1
        return list(self.objects)

    def __contains__(self, key):
        return key in self.objects


def names(n, prefix="k"):
    return [f"g/v1/widgets/ns/{prefix}{i}" for i in range(n)]


def walk(schedule, cache, start, end, step):
    """Call due() every `step` seconds after `start` up to `end` included; the keys of each call (a call at the
    end of a period gets what that period left)."""
    return [schedule.due(start + i * step, cache) for i in range(1, round((end - start) / step) + 1)]


def started(period, cache, phase=0.3):
    """A schedule whose informer listed at 0: its first period starts at `period`."""
    schedule = KindResync(period, phase)
    assert schedule.due(0.0, cache) == []
    assert schedule.origin == period
    return schedule


def test_nothing_before_the_list_nor_during_the_first_period_after_it():
    cache = FakeCache(names(50), synced=False)
    schedule = KindResync(100.0, 0.0)
    assert schedule.due(5.0, cache) == [] and schedule.origin is None  # not listed: waits
    cache.synced.set()
    assert schedule.due(10.0, cache) == [] and schedule.origin == 110.0  # the list enqueued every key
    assert all(keys == [] for keys in walk(schedule, cache, 10.0, 109.0, 1.0))
    assert cache.listed == 0  # and the cache was not even read meanwhile


def test_over_one_period_each_key_is_due_exactly_once_spread_evenly():
    n, period, steps = 1000, 100.0, 100
    cache = FakeCache(names(n))
    schedule = started(period, cache)
    calls = walk(schedule, cache, period, 2 * period, period / steps)
    seen = Counter(k for keys in calls for k in keys)
    assert set(seen) == set(cache.objects) and set(seen.values()) == {1}
    assert max(len(keys) for keys in calls) <= n // steps + 1
    assert cache.listed == 2  # once per period (the last call, at its end, began the next one)
    # the next period: each key once again, in the same order
    again = walk(schedule, cache, 2 * period, 3 * period, period / steps)
    assert [k for keys in again for k in keys] == [k for keys in calls for k in keys]


def test_irregular_steps_take_what_came_due_in_between():
    n, period = 600, 60.0
    cache = FakeCache(names(n))
    schedule = started(period, cache)
    seen = Counter(schedule.due(period, cache))
    last = period
    for gap in [0.01, 3.0, 0.5, 10.0, 0.2] * 12:
        if last + gap >= 2 * period:
            break
        keys = schedule.due(last + gap, cache)
        assert len(keys) <= n * gap / period + 1  # what came due since the last call, no more
        seen.update(keys)
        last += gap
    seen.update(schedule.due(2 * period, cache))  # a period ends: what it left is due
    assert set(seen.values()) == {1} and len(seen) == n


def test_a_key_deleted_mid_period_is_skipped_and_a_new_one_waits_for_the_next_period():
    period = 10.0
    cache = FakeCache(names(20))
    schedule = started(period, cache)
    first = walk(schedule, cache, period, 1.5 * period, 0.5)
    done = {k for keys in first for k in keys}
    gone = next(k for k in schedule.order if k not in done)
    del cache.objects[gone]
    cache.objects["g/v1/widgets/ns/new"] = {}
    rest = walk(schedule, cache, 1.5 * period, 2 * period, 0.5)
    seen = [k for keys in first + rest for k in keys]
    assert gone not in seen and "g/v1/widgets/ns/new" not in seen and len(seen) == 19 == len(set(seen))
    following = [k for keys in walk(schedule, cache, 2 * period, 3 * period, 0.5) for k in keys]
    assert "g/v1/widgets/ns/new" in following and gone not in following and len(following) == 20


def test_a_stalled_loop_gets_what_the_period_left_once_then_goes_on_from_the_current_period():
    period = 10.0
    cache = FakeCache(names(40))
    schedule = started(period, cache)
    half = [k for keys in walk(schedule, cache, period, 1.5 * period, 1.0) for k in keys]
    late = schedule.due(4.25 * period, cache)  # three periods late: the rest of the first, a quarter of this one
    assert len(late) == len(set(late))
    assert schedule.start == 4 * period
    assert set(half) | set(late) == set(cache.objects)  # the rest of the period that ended is all there
    quarter = schedule.order[:10]
    rest = [k for keys in walk(schedule, cache, 4.25 * period, 5 * period, 0.5) for k in keys]
    assert len(rest) == 30 and set(rest) | set(quarter) == set(cache.objects)


def test_the_order_is_stable_and_the_phase_rotates_it():
    cache = FakeCache(names(200))
    a, b, c = (started(10.0, cache, phase) for phase in (0.1, 0.1, 0.6))
    for schedule in (a, b, c):
        schedule.due(10.0, cache)
    assert a.order == b.order and set(a.order) == set(c.order)
    assert a.order != c.order  # another controller (or restart) starts elsewhere in the ring
    i = c.order.index(a.order[0])
    assert c.order[i:] + c.order[:i] == a.order  # a rotation of the same ring


def test_next_at_is_the_next_slot():
    cache = FakeCache(names(4))
    schedule = KindResync(8.0, 0.0)
    assert schedule.next_at() == float("inf")
    schedule.due(0.0, cache)
    assert schedule.next_at() == 8.0
    schedule.due(8.0, cache)
    assert schedule.next_at() == 9.0  # slots at 1, 3, 5, 7 s into the period
    assert len(schedule.due(9.0, cache)) == 1 and schedule.next_at() == 11.0
    schedule.due(15.0, cache)
    assert schedule.next_at() == 16.0  # all due: the next period


class NeverWidget(WidgetReconciler):
    resync_seconds = 0


class PollingGadget(GadgetReconciler):
    resync_seconds = 5.0


def test_a_kind_s_own_period_overrides_the_default():
    kinds = KindMap.of([NeverWidget(), PollingGadget()])
    wid, gid = kind_id(NeverWidget.resource), kind_id(PollingGadget.resource)
    assert periods(kinds, 36000.0) == {wid: 0.0, gid: 5.0}
    assert periods(KindMap.of([WidgetReconciler()]), 36000.0) == {wid: 36000.0}
    assert periods(KindMap.of([WidgetReconciler()]), 0.0) == {wid: 0.0}  # the setting's 0: none
    assert Reconciler.resync_seconds is None


def test_the_schedule_of_every_kind_and_the_full_resync():
    kinds = KindMap.of([NeverWidget(), PollingGadget()])
    wid, gid = kind_id(NeverWidget.resource), kind_id(PollingGadget.resource)
    caches = {wid: FakeCache(names(30, "w")), gid: FakeCache(names(10, "g"))}
    schedule = ResyncSchedule(kinds, 36000.0, lambda: caches, phase=0.0)
    gadgets = metrics.RESYNC_KEYS.labels(PollingGadget.resource.kind)
    widgets = metrics.RESYNC_KEYS.labels(NeverWidget.resource.kind)
    before_g, before_w = gadgets._value.get(), widgets._value.get()

    assert schedule.due(0.0) == []  # both listed at 0
    seen = Counter()
    t = 0.0
    while t < 20.0:  # three periods of the Gadgets (5 s, from 5 s): each Gadget three times; Widgets never
        seen.update(schedule.due(t))
        t += 0.25
    assert set(seen) == set(caches[gid].objects) and set(seen.values()) == {3}
    assert schedule.next_at() <= 20.0

    full = schedule.full()  # after an outage: every key of every kind at once, whatever its period
    assert sorted(full) == sorted([*caches[wid].objects, *caches[gid].objects])
    assert gadgets._value.get() - before_g == 30 + 10 and widgets._value.get() - before_w == 30
    assert schedule.counts == {wid: 30, gid: 40}


def test_restart_waits_for_the_new_list():
    kinds = KindMap.of([WidgetReconciler()])
    cache = FakeCache(names(5))
    schedule = ResyncSchedule(kinds, 10.0, lambda: {kind_id(WidgetReconciler.resource): cache})
    schedule.due(0.0)
    assert len([k for t in range(10, 20) for k in schedule.due(float(t))]) == 5
    cache.synced.clear()  # stopped leading; the informers start again later
    schedule.restart()
    assert [k for t in range(20, 40) for k in schedule.due(float(t))] == []
    cache.synced.set()
    assert schedule.due(40.0) == [] and schedule.next_at() == 50.0


@pytest.mark.parametrize("n", [0, 1, 7])
def test_small_and_empty_kinds(n):
    cache = FakeCache(names(n))
    schedule = started(4.0, cache)
    keys = [k for keys in walk(schedule, cache, 4.0, 8.0, 0.125) for k in keys]
    assert sorted(keys) == sorted(cache.objects)
