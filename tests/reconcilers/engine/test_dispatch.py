"""Dispatch sends `reconcilers.reconcile` tasks by name onto the configured Celery queue of the real Redis
broker, once per key the workqueue says is ready, and never with an ETA or countdown."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from opsconsole.celery import app
from reconcilers.engine import dispatch
from reconcilers.engine.workqueue import WorkQueue

KEY = "cache.example.com/v1alpha1/memcacheds/default/web"


class FakeClock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def broker_queue(redis_client) -> str:
    """A private Celery queue for this test; its list and binding are deleted afterwards."""
    name = f"test-dispatch-{uuid.uuid4().hex[:10]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = name
    try:
        yield name
    finally:
        app.conf.task_default_queue = previous
        leftovers = list(redis_client.scan_iter(match=f"*{name}*"))
        if leftovers:
            redis_client.delete(*leftovers)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def wq(redis_client, broker_queue, clock, monkeypatch) -> WorkQueue:
    q = WorkQueue(redis_client, name=broker_queue, clock=clock, lease_seconds=10)
    monkeypatch.setattr(dispatch, "get_queue", lambda: q)
    yield q
    q.clear()


def sent(redis_client, queue: str) -> list[dict]:
    """The task messages waiting in the broker's list for queue, oldest first."""
    out = []
    for raw in reversed(redis_client.lrange(queue, 0, -1)):  # kombu LPUSHes and BRPOPs
        message = json.loads(raw)
        body = json.loads(base64.b64decode(message["body"]))
        out.append({"headers": message["headers"], "args": body[0], "kwargs": body[1]})
    return out


def test_a_hundred_enqueues_of_one_key_send_one_task_by_name(wq, redis_client, broker_queue) -> None:
    results = [dispatch.enqueue(KEY) for _ in range(100)]
    assert results.count(True) == 1
    (message,) = sent(redis_client, broker_queue)
    assert message["headers"]["task"] == "reconcilers.reconcile"
    assert message["args"] == [KEY] and message["kwargs"] == {"only_if_queued": True}
    assert message["headers"]["eta"] is None and "countdown" not in message["headers"]


def test_enqueue_many_sends_one_task_per_key_not_already_queued(wq, redis_client, broker_queue) -> None:
    dispatch.enqueue(KEY)
    other = KEY + "-2"
    assert dispatch.enqueue_many([KEY, other, other]) == [other]
    assert [m["args"] for m in sent(redis_client, broker_queue)] == [[KEY], [other]]


def test_an_enqueue_during_processing_sends_nothing_until_done(wq, redis_client, broker_queue) -> None:
    dispatch.enqueue(KEY)
    redis_client.delete(broker_queue)  # the worker took the task
    wq.claim(KEY, "w1")
    assert dispatch.enqueue(KEY) is False and dispatch.enqueue(KEY) is False
    assert sent(redis_client, broker_queue) == []
    assert dispatch.done(KEY, "w1") is True
    assert [m["args"] for m in sent(redis_client, broker_queue)] == [[KEY]]


def test_enqueue_after_waits_in_the_workqueue_and_pump_sends_it_when_due(
    wq, redis_client, broker_queue, clock
) -> None:
    dispatch.enqueue_after(KEY, 300)
    assert dispatch.pump() == 0
    assert sent(redis_client, broker_queue) == []
    clock.now += 300
    assert dispatch.pump() == 1
    (message,) = sent(redis_client, broker_queue)
    assert message["args"] == [KEY] and message["headers"]["eta"] is None
    assert dispatch.pump() == 0


def test_enqueue_after_without_delay_sends_at_once(wq, redis_client, broker_queue) -> None:
    dispatch.enqueue_after(KEY, 0)
    assert len(sent(redis_client, broker_queue)) == 1


def test_pump_sends_the_keys_of_expired_leases(wq, redis_client, broker_queue, clock) -> None:
    wq.add("a")
    wq.add("b")
    wq.claim("a", "killed")
    wq.claim("b", "alive")
    clock.now += 5
    wq.renew("b", "alive")
    clock.now += 6
    assert dispatch.pump() == 1
    assert [m["args"] for m in sent(redis_client, broker_queue)] == [["a"]]


def test_retry_now_sends_a_backing_off_key(wq, redis_client, broker_queue) -> None:
    wq.add_rate_limited(KEY)
    assert dispatch.retry_now("unknown") is False
    assert dispatch.retry_now(KEY) is True
    assert [m["args"] for m in sent(redis_client, broker_queue)] == [[KEY]]


def test_dispatch_sends_one_task_per_key_on_one_connection(wq, redis_client, broker_queue) -> None:
    keys = [f"{KEY}-{i}" for i in range(50)]
    assert dispatch.dispatch(keys) == 50
    assert dispatch.dispatch([]) == 0
    assert [m["args"][0] for m in sent(redis_client, broker_queue)] == keys


def test_dispatch_from_outside_a_worker_does_not_wait_for_results(wq, redis_client, broker_queue,
                                                                   monkeypatch) -> None:
    """The task stores no result: a sender outside a worker (the controller) must not subscribe to each task's
    result channel (Celery's Redis backend does so unless the send says `ignore_result`), nor unsubscribe after."""
    subscribed: list[str] = []
    monkeypatch.setattr(app.backend, "on_task_call", lambda producer, task_id: subscribed.append(task_id))
    assert dispatch.dispatch([f"{KEY}-{i}" for i in range(3)]) == 3
    assert subscribed == []
    assert [m["headers"]["ignore_result"] for m in sent(redis_client, broker_queue)] == [True] * 3


def test_the_workqueue_s_redis_client_parses_with_hiredis(broker_queue) -> None:
    """hiredis (pinned with redis-py) packs commands and parses replies in C: a workqueue script call with an object
    costs about half the client CPU of the pure-Python parser. Without it redis-py silently falls back."""
    connection = dispatch.get_queue().redis.connection_pool.get_connection()
    try:
        assert type(connection._parser).__name__ == "_HiredisParser"
    finally:
        dispatch.get_queue().redis.connection_pool.release(connection)


def test_get_queue_is_one_per_process_named_after_the_celery_queue(broker_queue, settings) -> None:
    settings.OPSCONSOLE_WORKQUEUE_LEASE_SECONDS = 7
    first = dispatch.get_queue()
    assert first is dispatch.get_queue()
    assert first.name == broker_queue and first.lease_seconds == 7 and first.clock is None
    settings.OPSCONSOLE_WORKQUEUE_NAME = f"{broker_queue}-explicit"
    assert dispatch.get_queue().name == f"{broker_queue}-explicit"
    first.clear()
