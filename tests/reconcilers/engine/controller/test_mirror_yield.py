"""The mirror's refreshes yield to the reconciles in a burst (Controller._write_mirror, yielding.Yielding), and
linger outside one (MIRROR_REFRESH_LINGER_SECONDS)."""

from __future__ import annotations

from typing import Any

import pytest

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine.controller.handoff import MirrorUpdate
from reconcilers.engine.controller.loop import MIRROR_REFRESH_LINGER_SECONDS, MIRROR_YIELD_MAX_SECONDS, Controller
from reconcilers.engine.controller.wiring import build_controller
from reconcilers.engine.controller.yielding import Yielding

KIND = ResourceKind("cache.example.com", "v1alpha1", "memcacheds", "Memcached")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Depth:
    def __init__(self, pending: int) -> None:
        self.pending = pending


def _controller(clock: Clock, depth: dict[str, int], written: list[list[tuple[str, int, bool]]],
                fail_uid: str = "") -> Controller:
    def write(updates: list[MirrorUpdate]) -> None:
        if any(u.uid == fail_uid for u in updates):
            raise RuntimeError("bad object")
        written.append([(u.uid, u.obj["v"], u.deleted) for u in updates])

    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: 0, mirror_write=write,
                                  archive_events=False, clock=clock, queue_depths=lambda: {"k": Depth(depth["n"])})
    controller.running = True
    return controller


def _put(controller: Controller, uid: str, v: int, deleted: bool = False) -> None:
    obj: dict[str, Any] = {"v": v}
    controller.handoff.put_mirror(MirrorUpdate(KIND, uid, obj, deleted))


def test_while_keys_wait_only_new_objects_and_deletions_are_written_refreshes_wait_coalesced() -> None:
    clock, depth, written = Clock(), {"n": 0}, []
    controller = _controller(clock, depth, written)
    _put(controller, "a", 1)
    _put(controller, "b", 1)
    assert controller._write_mirror() is True and written == [[("a", 1, False), ("b", 1, False)]]

    depth["n"] = 7  # a burst: keys wait for a worker
    controller._queue_metrics()
    _put(controller, "a", 2)  # a refresh of an object on record: waits
    _put(controller, "c", 1)  # a new object: written now (a run's one-statement record needs its row)
    _put(controller, "b", 2, deleted=True)  # a deletion: written now
    assert controller._write_mirror() is True
    assert written[-1] == [("c", 1, False), ("b", 2, True)]
    _put(controller, "a", 3)  # coalesced with the waiting refresh
    _put(controller, "c", 2)
    assert controller._write_mirror() is False and len(written) == 2  # nothing new: no write, no spin
    assert controller.mirror_yields == 2

    depth["n"] = 0  # the burst is over: the next depth sample lets the refreshes go, the newest of each
    controller._queue_metrics()
    clock.now += MIRROR_REFRESH_LINGER_SECONDS  # (once the linger after the last write has passed)
    assert controller._write_mirror() is True and written[-1] == [("a", 3, False), ("c", 2, False)]
    _put(controller, "b", 3)  # b was deleted: a uid seen again is new to this controller
    depth["n"] = 7
    controller._queue_metrics()
    assert controller._write_mirror() is True and written[-1] == [("b", 3, False)]


def test_refreshes_wait_at_most_the_yield_bound_then_go_in_one_batch() -> None:
    clock, depth, written = Clock(), {"n": 5}, []
    controller = _controller(clock, depth, written)
    _put(controller, "a", 1)
    assert controller._write_mirror() is True  # not yet sampled: no yielding
    controller._queue_metrics()
    _put(controller, "a", 2)
    assert controller._write_mirror() is False
    clock.now += MIRROR_YIELD_MAX_SECONDS - 0.5
    assert controller._write_mirror() is False
    clock.now += 0.5
    assert controller._write_mirror() is True and written[-1] == [("a", 2, False)]  # waited long enough
    _put(controller, "a", 3)
    assert controller._write_mirror() is False  # a new run of yielding


def test_outside_a_burst_refreshes_linger_and_go_with_the_next_write_or_after_the_linger() -> None:
    clock, depth, written = Clock(), {"n": 0}, []
    controller = _controller(clock, depth, written)
    _put(controller, "a", 1)
    assert controller._write_mirror() is True and written == [[("a", 1, False)]]  # a new object: at once
    clock.now += MIRROR_REFRESH_LINGER_SECONDS - 0.3
    _put(controller, "a", 2)  # its status echo: waits for the linger
    assert controller._write_mirror() is False and len(written) == 1
    controller._next_pump = clock.now + 5  # nothing else due: the loop sleeps until the linger ends
    assert controller._sleep_budget() == pytest.approx(0.3)
    _put(controller, "b", 1)  # a new object: written at once, the waiting refresh with it
    assert controller._write_mirror() is True and written[-1] == [("b", 1, False), ("a", 2, False)]
    clock.now += 0.2
    _put(controller, "a", 3)
    _put(controller, "b", 2)
    assert controller._write_mirror() is False  # the linger restarted with the last write
    _put(controller, "a", 4)  # coalesced
    clock.now += MIRROR_REFRESH_LINGER_SECONDS - 0.2
    assert controller._write_mirror() is True and sorted(written[-1]) == [("a", 4, False), ("b", 2, False)]
    _put(controller, "b", 3, deleted=True)  # a deletion never waits
    assert controller._write_mirror() is True and written[-1] == [("b", 3, True)]
    assert controller.mirror_yields == 0  # lingering is not yielding


def test_an_idle_controller_writes_a_lone_refresh_at_once() -> None:
    clock, depth, written = Clock(), {"n": 0}, []
    controller = _controller(clock, depth, written)
    _put(controller, "a", 1)
    controller._write_mirror()
    clock.now += MIRROR_REFRESH_LINGER_SECONDS  # a quiet second: a spec edit now shows at once
    _put(controller, "a", 2)
    assert controller._write_mirror() is True and written[-1] == [("a", 2, False)]


def test_an_object_whose_write_failed_is_not_taken_for_one_on_record() -> None:
    clock, depth, written = Clock(), {"n": 5}, []
    controller = _controller(clock, depth, written, fail_uid="bad")
    _put(controller, "ok", 1)
    _put(controller, "bad", 1)
    assert controller._write_mirror() is True and written == [[("ok", 1, False)]]  # one by one after the batch
    controller._queue_metrics()
    _put(controller, "bad", 2)
    _put(controller, "ok", 2)
    controller._write_mirror()
    assert controller.handoff.pending() == (0, 1)  # "ok" waits; "bad" (never on record) was tried again


def test_yielding_counts_its_rounds_and_starts_again_after_its_bound() -> None:
    y = Yielding(2.0)
    assert y.yields(False, 0.0) is False
    assert [y.yields(True, t) for t in (1.0, 2.0, 3.0, 3.5)] == [True, True, False, True]
    assert y.rounds == 3 and y.since == 3.5
    assert y.yields(False, 4.0) is False and y.since is None
