"""The controller while its workqueue (Redis) cannot be reached: enqueues and pumps back off exponentially up to
a cap instead of being retried on every step, the keys are kept, and once the queue answers they are enqueued,
the backoff is reset and every cached key is resynced at once (a restarted Redis lost what it held). Driven
step by step on a fake clock, against the session kubesim."""

from __future__ import annotations

import time

from reconcilers.engine import kube
from reconcilers.engine.controller.loop import QUEUE_BACKOFF_MAX, QUEUE_BACKOFF_MIN
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import WIDGET, WidgetReconciler, widget


class FlakyQueue:
    """enqueue and pump that raise ConnectionError while `down`; each call is counted."""

    def __init__(self) -> None:
        self.down = False
        self.enqueue_calls = 0
        self.pump_calls = 0
        self.keys: list[str] = []

    def enqueue(self, key: str) -> bool:
        self.enqueue_calls += 1
        if self.down:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.keys.append(key)
        return True

    def pump(self) -> int:
        self.pump_calls += 1
        if self.down:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        return 0


def test_enqueues_and_pumps_back_off_while_the_workqueue_is_away_and_resume_with_the_keys(api, widget_kind, ns):
    now = [1000.0]
    queue = FlakyQueue()
    controller = build_controller(api, [WidgetReconciler()], enqueue=queue.enqueue, pump=queue.pump, mirror=False,
                                  resync_seconds=0, clock=lambda: now[0])
    try:
        controller.step()  # leads (no elector): starts the informers; pumps once
        assert controller.wait_synced(10) and queue.pump_calls == 1
        controller.step()  # the listed keys (other tests' widgets) go to the queue
        queue.down, queue.enqueue_calls = True, 0  # Redis goes away
        kube.create_object(api, WIDGET, widget("kept", ns))
        key = WIDGET.request(ns, "kept").key()
        deadline = time.monotonic() + 10
        while queue.enqueue_calls == 0 and time.monotonic() < deadline:
            controller.step()
            controller.handoff.wait(0.02)
        assert queue.enqueue_calls == 1 and queue.pump_calls == 1

        for _ in range(200):  # the clock stands still: no retry, however often the loop steps
            controller.step()
        assert queue.enqueue_calls == 1 and queue.pump_calls == 1
        assert controller.handoff.pending()[0] >= 1  # the key is kept

        pauses = []
        for _ in range(12):  # each retry fails and doubles the pause, up to the cap
            pause = controller._queue_retry_at - now[0]
            pauses.append(round(pause, 3))
            calls = queue.enqueue_calls + queue.pump_calls
            now[0] += pause * 0.9
            controller.step()
            assert queue.enqueue_calls + queue.pump_calls == calls  # not yet
            now[0] += pause * 0.1
            controller.step()
            assert queue.enqueue_calls + queue.pump_calls > calls  # retried when due
        assert pauses[0] == QUEUE_BACKOFF_MIN and pauses[1] == 2 * QUEUE_BACKOFF_MIN
        assert max(pauses) == QUEUE_BACKOFF_MAX and pauses[-1] == QUEUE_BACKOFF_MAX
        assert 0 < controller._sleep_budget() <= 0.5  # the loop sleeps meanwhile, it does not spin

        queue.down = False
        now[0] = controller._queue_retry_at
        resyncs = controller.resyncs
        controller.step()
        assert key in queue.keys  # the kept key reached the queue
        assert controller._queue_backoff == 0.0
        assert controller.resyncs == resyncs + 1  # and every cached key was put back (resync_seconds is 0 here)
        assert set(controller.cached_keys()) <= set(queue.keys)
        controller.step()
        assert controller.resyncs == resyncs + 1  # once
        calls = queue.pump_calls
        now[0] += controller.pump_interval
        controller.step()
        assert queue.pump_calls == calls + 1  # back to the normal pump interval
    finally:
        controller.shutdown()
