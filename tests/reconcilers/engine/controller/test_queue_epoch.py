"""A Redis that lost the workqueue without any call failing (restarted empty between two calls, or flushed): the
queue's epoch (WorkQueue.epoch) changes, and the controller resyncs every key at once instead of waiting hours
for the periodic resync. Driven step by step on a fake clock, against this directory's kubesim and the real
Redis."""

from __future__ import annotations

import uuid

import redis

from reconcilers.engine import kube
from reconcilers.engine.controller.feed import EPOCH_CHECK_SECONDS
from reconcilers.engine.controller.wiring import build_controller
from reconcilers.engine.workqueue import WorkQueue
from tests.reconcilers.engine.controller.kinds import WIDGET, WidgetReconciler, widget


def test_the_epoch_is_written_once_kept_by_clear_and_new_after_redis_lost_it(redis_client: redis.Redis) -> None:
    queue = WorkQueue(redis_client, name=f"test-epoch-{uuid.uuid4().hex[:8]}")
    try:
        first = queue.epoch("one")
        assert first == "one" and queue.epoch("two") == "one"
        queue.clear()  # emptied on purpose: nothing anyone waits for was lost
        assert queue.epoch("three") == "one"
        redis_client.delete(queue.prefix + "epoch")  # what a restart without persistence or FLUSHDB does
        assert queue.epoch("four") == "four"
    finally:
        redis_client.delete(queue.prefix + "epoch")


def test_a_queue_lost_without_a_failed_call_is_resynced_at_once(api, widget_kind, ns, redis_client):
    now = [1000.0]
    queue = WorkQueue(redis_client, name=f"test-epoch-{uuid.uuid4().hex[:8]}")
    sent: list[str] = []

    def enqueue(key: str) -> bool:
        sent.append(key)
        return True

    controller = build_controller(api, [WidgetReconciler()], enqueue=enqueue, pump=lambda: 0, mirror=False,
                                  resync_seconds=0, clock=lambda: now[0], queue_epoch=queue.epoch)
    try:
        kube.create_object(api, WIDGET, widget("w", ns))
        key = WIDGET.request(ns, "w").key()
        controller.step()
        assert controller.wait_synced(10)
        for _ in range(50):
            controller.step()
            if key in sent:
                break
            controller.handoff.wait(0.02)
        assert key in sent and controller.feed.epoch_seen
        resyncs = controller.resyncs

        for _ in range(3):  # the epoch unchanged: nothing more
            now[0] += EPOCH_CHECK_SECONDS
            controller.step()
        assert controller.resyncs == resyncs

        redis_client.delete(queue.prefix + "epoch")  # Redis lost the queue; no call failed
        sent.clear()
        now[0] += EPOCH_CHECK_SECONDS
        controller.step()  # the pump reads a new epoch: resync_now
        controller.step()
        assert controller.resyncs == resyncs + 1 and key in sent
    finally:
        controller.shutdown()
        queue.clear()
        redis_client.delete(queue.prefix + "epoch")
