"""Duplicate tasks: `reap_expired` re-sends a key whose task has not been claimed within `redispatch_after`, but
that task may only be waiting behind a long backlog (200 CRs on two workers), and then every copy used to
run a full reconcile, each copy making the backlog longer. Claimed `only_if_dirty` (as the engine's tasks are),
the first task consumes the dirty mark and the copies find nothing queued: no lease, no dirty mark, no run."""

from __future__ import annotations

from tests.reconcilers.engine.test_workqueue import KEY, FakeClock, clock, make_queue  # noqa: F401 - fixtures


def test_copies_of_a_task_that_was_only_waiting_find_nothing_queued(make_queue, clock: FakeClock) -> None:  # noqa: F811
    wq = make_queue(redispatch_after=60, lease_seconds=1000)
    assert wq.add(KEY)  # the task is sent, and waits behind a backlog
    clock.advance(61)
    assert wq.reap_expired() == [KEY]  # taken for lost: a copy is sent
    clock.advance(61)
    assert wq.reap_expired() == [KEY]  # and another

    first = wq.claim(KEY, "w1", only_if_dirty=True)  # the original finally runs
    assert first is not None and first.queued_at < clock.now
    assert wq.done(KEY, "w1") is False
    assert wq.claim(KEY, "w2", only_if_dirty=True) is None  # the copies: nothing to do
    assert wq.claim(KEY, "w3", only_if_dirty=True) is None
    snap = wq.snapshot()
    assert snap.depth == 0 and snap.processing_count == 0 and snap.delayed_count == 0
    assert wq.reap_expired() == []  # nothing left to re-send either


def test_a_copy_arriving_while_the_key_is_processing_does_not_queue_it_again(make_queue, clock: FakeClock) -> None:  # noqa: F811
    wq = make_queue(lease_seconds=1000)
    assert wq.add(KEY)
    assert wq.claim(KEY, "w1", only_if_dirty=True) is not None
    assert wq.claim(KEY, "w2", only_if_dirty=True) is None  # a copy: neither claims nor marks the key dirty
    assert wq.done(KEY, "w1") is False  # so the run's end re-queues nothing
    wq.add(KEY)
    assert wq.claim(KEY, "w3", only_if_dirty=True) is not None  # a real change is still picked up


def test_a_plain_claim_still_takes_a_key_that_is_not_queued(make_queue) -> None:  # noqa: F811
    wq = make_queue()
    assert wq.claim(KEY, "direct") is not None  # runner.run(key) called directly (tests, commands, bench)
