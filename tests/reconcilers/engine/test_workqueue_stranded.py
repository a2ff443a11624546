"""Stranded keys: a key is marked "sent" before its task reaches the broker, so a process killed in between
(the controller during a burst) leaves a key queued whose task never was. Its mark is released and the key
re-sent when no worker claimed it within `redispatch_after` (a few seconds), the wait doubling per copy up to
`redispatch_max`; a copy of a task that was only waiting finds nothing to claim (no double run). `retry_now`
(the queue's retry-now, and manual requests through `dispatch.enqueue_now`) sends such a key at once."""

from __future__ import annotations

import itertools

import pytest

from reconcilers.engine import dispatch
from reconcilers.engine.workqueue import WorkQueue
from reconcilers.services.queue_controls import queue_retry_now
from tests.reconcilers.engine.test_workqueue import KEY, FakeClock, clock, make_queue  # noqa: F401 - fixtures

OTHER = "cache.example.com/v1alpha1/memcacheds/default/other"


@pytest.fixture
def stranded(make_queue, clock: FakeClock) -> WorkQueue:  # noqa: F811
    """A queue with production-like redispatch (5 s, doubling to 40 s) and KEY marked sent, its task never sent."""
    wq = make_queue(redispatch_after=5, redispatch_max=40, lease_seconds=1000)
    assert wq.add(KEY)  # ... and the controller is SIGKILLed before dispatch() sends the task
    return wq


def test_an_unclaimed_key_is_released_after_redispatch_after_and_then_after_doubling_waits(
    stranded: WorkQueue, clock: FakeClock  # noqa: F811
) -> None:
    clock.advance(4.9)
    assert stranded.add(KEY) is False  # the restarted controller's add is coalesced: it thinks KEY is queued
    assert stranded.reap_expired() == []  # not yet: the task may still be on its way
    clock.advance(0.2)
    assert stranded.reap_expired() == [KEY]  # 5 s without a claim: re-sent
    resent_at = [clock.now]
    for _ in range(6):
        for _ in range(500):
            clock.advance(0.5)
            if stranded.reap_expired() == [KEY]:
                resent_at.append(clock.now)
                break
    gaps = [b - a for a, b in itertools.pairwise(resent_at)]
    assert gaps == [pytest.approx(g, abs=0.6) for g in (10, 20, 40, 40, 40, 40)]  # doubling, capped at the max


def test_a_claim_ends_the_checks_and_a_new_add_starts_from_the_base_wait_again(
    stranded: WorkQueue, clock: FakeClock  # noqa: F811
) -> None:
    clock.advance(6)
    assert stranded.reap_expired() == [KEY]
    clock.advance(11)
    assert stranded.reap_expired() == [KEY]  # two copies sent: the next check would be 20 s away
    assert stranded.claim(KEY, "w1", only_if_dirty=True) is not None
    clock.advance(100)
    assert stranded.reap_expired() == []  # claimed: no longer marked sent (a lease is not a lost task)
    assert stranded.done(KEY, "w1") is False
    assert stranded.add(KEY)
    clock.advance(5.1)
    assert stranded.reap_expired() == [KEY]  # the count was reset: 5 s again, not 40


def test_the_original_and_its_copies_run_the_key_once(stranded: WorkQueue, clock: FakeClock) -> None:  # noqa: F811
    clock.advance(6)
    assert stranded.reap_expired() == [KEY]  # a copy, though the original only waited in a backlog
    claims = [stranded.claim(KEY, f"w{i}", only_if_dirty=True) for i in range(3)]  # original + copy + a retry-now
    assert [c is not None for c in claims] == [True, False, False]
    assert stranded.done(KEY, "w0") is False
    assert stranded.claim(KEY, "late", only_if_dirty=True) is None
    snap = stranded.snapshot()
    assert (snap.depth, snap.processing_count, snap.delayed_count) == (0, 0, 0)


def test_a_copy_arriving_during_the_run_waits_for_the_next_change_only(
    stranded: WorkQueue, clock: FakeClock  # noqa: F811
) -> None:
    clock.advance(6)
    assert stranded.reap_expired() == [KEY]
    assert stranded.claim(KEY, "w1", only_if_dirty=True) is not None
    assert stranded.add(KEY) is False  # changed while running: dirty, sent by done()
    assert stranded.claim(KEY, "copy", only_if_dirty=True) is None  # lease held: no concurrent run
    assert stranded.done(KEY, "w1") is True  # the change is sent once
    assert stranded.claim(KEY, "copy-again", only_if_dirty=True) is not None
    assert stranded.claim(KEY, "the-done-task", only_if_dirty=True) is None


def test_retry_now_sends_a_key_stuck_in_sent_at_once(stranded: WorkQueue, clock: FakeClock) -> None:  # noqa: F811
    assert stranded.retry_now(KEY) is True  # queued, not processing: maybe stuck, a copy is harmless
    assert stranded.retry_now(OTHER) is False  # not queued at all
    assert stranded.claim(KEY, "w1", only_if_dirty=True) is not None
    assert stranded.retry_now(KEY) is False  # processing: its done() sends it when it changed
    assert stranded.add(KEY) is False
    assert stranded.retry_now(KEY) is False
    assert stranded.done(KEY, "w1") is True


def test_retry_now_of_a_delayed_key_that_is_also_stuck_sends_it(make_queue) -> None:  # noqa: F811
    wq = make_queue(redispatch_after=5, lease_seconds=1000)
    assert wq.add(KEY)  # stranded
    wq.add_after(KEY, 60)
    assert wq.retry_now(KEY) is True
    assert wq.snapshot().delayed_count == 0


def test_invalid_redispatch_parameters_are_refused(make_queue) -> None:  # noqa: F811
    with pytest.raises(ValueError):
        make_queue(redispatch_after=0)
    with pytest.raises(ValueError):
        make_queue(redispatch_after=10, redispatch_max=5)


def test_dispatch_settings_give_a_few_seconds_doubling_to_the_redispatch_setting(settings) -> None:
    settings.OPSCONSOLE_WORKQUEUE_NAME = "test-stranded-settings"
    settings.OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER = 300
    queue = dispatch.get_queue()
    assert (queue.redispatch_after, queue.redispatch_max) == (5.0, 300.0)
    settings.OPSCONSOLE_WORKQUEUE_NAME = "test-stranded-settings-2"
    settings.OPSCONSOLE_WORKQUEUE_UNCLAIMED_AFTER = 2
    settings.OPSCONSOLE_WORKQUEUE_REDISPATCH_AFTER = 1  # below the first wait: no doubling
    queue = dispatch.get_queue()
    assert (queue.redispatch_after, queue.redispatch_max) == (2.0, 2.0)


def test_enqueue_now_and_queue_retry_now_send_a_stuck_key(stranded: WorkQueue, monkeypatch) -> None:
    sent: list[str] = []
    monkeypatch.setattr(dispatch, "get_queue", lambda: stranded)
    monkeypatch.setattr(dispatch, "dispatch", lambda keys: sent.extend(keys) or len(list(keys)))
    assert dispatch.enqueue(KEY) is False  # the old path: coalesced, nothing sent (the hole)
    assert dispatch.enqueue_now(KEY) is True  # a manual request's path
    result = queue_retry_now(KEY)  # the queue page's retry-now
    assert result.changed is True
    assert sent == [KEY, KEY]
    assert dispatch.enqueue_now(OTHER) is True and sent[-1] == OTHER  # a key not queued: a plain enqueue
