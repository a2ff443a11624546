"""The controller's background steps: the Events archive and the healing step run on threads of their own under
`runcontroller` (`build_controller(background=True)`), so a slow one never holds up the loop's enqueueing and pump; in
tests (`background=False`) the loop runs them inline."""

from __future__ import annotations

import threading
import time

from reconcilers.engine.controller.background import BackgroundStep
from reconcilers.engine.controller.wiring import build_controller


def test_a_background_step_runs_again_at_once_after_work_and_survives_an_error():
    calls: list[str] = []
    done = threading.Event()

    def step() -> bool:
        calls.append("step")
        if len(calls) == 2:
            raise RuntimeError("the database is away")
        if len(calls) >= 4:
            done.set()
        return len(calls) == 1

    thread = BackgroundStep("test", step, idle=0.01)
    thread.start()
    assert done.wait(5)
    thread.stop()
    assert not thread.is_alive() and len(calls) >= 4


def test_a_slow_background_step_does_not_hold_up_the_loop():
    slow = threading.Event()
    pumps: list[float] = []

    def heal() -> bool:
        slow.wait(5)  # a healing step stuck on a slow API server
        return False

    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: pumps.append(time.monotonic()) or 0,
                                  mirror=False, archive_events=False, heal_interval=0.01, heal=heal, background=True,
                                  pump_interval=0.0)
    controller.running = True
    controller._threads.append(BackgroundStep("healing", controller._heal, controller.heal_interval))
    controller._threads[0].start()
    try:
        started = time.monotonic()
        for _ in range(5):
            controller.step()
        assert len(pumps) == 5 and time.monotonic() - started < 1.0
    finally:
        slow.set()
        controller._stop_informers()
    assert controller._threads == []


def test_without_background_the_loop_runs_the_healing_step_inline():
    heals: list[int] = []
    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: 0, mirror=False,
                                  archive_events=False, heal_interval=0.01, heal=lambda: heals.append(1))
    controller.running = True
    controller.step()
    assert heals == [1]


def test_the_loop_samples_the_queue_depth_for_its_history_every_fifteen_seconds():
    from types import SimpleNamespace

    now = [100.0]
    samples: list[int] = []
    controller = build_controller(None, [], enqueue=lambda key: True, pump=lambda: 0, mirror=False,
                                  archive_events=False,
                                  queue_depths=lambda: {"a/v1/x": SimpleNamespace(pending=3, unfinished_seconds=0.0,
                                                                                  longest_running_seconds=0.0)},
                                  clock=lambda: now[0])
    controller.depth_record = samples.append
    for step in range(40):  # 40 s of 1-second metric updates
        now[0] = 100.0 + step
        controller._queue_metrics()
    assert samples == [3, 3, 3]
