"""The workqueue's cap on keys sent and not yet claimed (`max_sent`), the keys it then holds ready, a worker
draining them (`claim_next`) and `top_up`: the rules against the real Redis, with an injected clock."""

from __future__ import annotations

import threading
import time

import pytest

from reconcilers.engine.workqueue import WorkQueue
from tests.reconcilers.engine.test_workqueue import clock, make_queue  # noqa: F401 - fixtures


def key(name: str) -> str:
    return f"cache.example.com/v1alpha1/memcacheds/default/{name}"


@pytest.fixture
def queue(make_queue):  # noqa: F811 - the fixture imported above
    """A queue capped at `max_sent` (2 unless given), 10 s leases, no token bucket; its fake clock is `q.clock`."""

    def make(max_sent: int = 2, **kwargs) -> WorkQueue:
        return make_queue(max_sent=max_sent, lease_seconds=10, bucket_qps=0, **kwargs)

    return make


def keys(*names: str) -> list[str]:
    return [key(n) for n in names]


def test_beyond_the_cap_keys_wait_ready_instead_of_being_sent(queue):
    q = queue(max_sent=2)
    sent = []
    for name in "abcde":
        q.clock.advance(1)
        if q.add(key(name)):
            sent.append(key(name))
    assert sent == keys("a", "b")
    assert q.snapshot().depth == 5  # all five wait for a worker
    assert q.add_many(keys("f")) == []
    # newly queued, sent or held (workqueue_adds_total counts both); coalesced ones are neither
    assert q.add_many_queued(keys("a", "g", "g")) == ([], keys("g"))


def test_a_draining_worker_takes_the_longest_queued_key_sent_or_not(queue):
    q = queue(max_sent=2)
    for name in "abcd":
        q.clock.advance(1)
        q.add(key(name))  # a and b sent, c and d ready
    first = q.claim_next("w1")
    assert first is not None and first.key == key("a") and first.owner == "w1"
    assert first.queued_at == pytest.approx(q.clock.now - 3)
    assert [q.claim_next("w").key for _ in range(3)] == keys("b", "c", "d")
    assert q.claim_next("w") is None and q.snapshot().processing_count == 4
    # a's and b's tasks keep their places under the cap until they arrive: the pump sends nothing meanwhile
    q.clock.advance(1)
    q.add(key("e"))
    assert q.top_up() == []
    assert q.claim(key("a"), "task-a", only_if_dirty=True) is None  # a's task: a drainer had it, nothing to do
    assert q.top_up() == keys("e")  # its place is free


def test_a_key_changed_while_it_runs_is_not_taken_by_a_drainer_until_it_is_done(queue):
    q = queue(max_sent=1)
    q.add(key("a"))
    assert q.claim(key("a"), "w1") is not None
    q.add(key("a"))  # dirty while processing
    assert q.claim_next("w2") is None
    q.clock.advance(1)
    q.add(key("x"))  # sent: the cap has room (a's task was claimed)
    assert not q.done(key("a"), "w1")  # the cap is full (x's task waits): a stays ready
    assert q.top_up() == []
    got = q.claim_next("w2")
    assert got is not None and got.key == key("a")  # changed before x was queued: first come, first served
    assert q.claim_next("w2").key == key("x")


def test_done_then_claim_next_releases_and_takes_the_next_key_in_one_call(queue):
    """A draining worker's step from one key to the next: the lease let go as `done(hold=True)` says (a key dirty
    meanwhile waits ready, no task sent; failures reset; RequeueAfter delayed), then `claim_next`."""
    q = queue(max_sent=1)
    for name in "ab":
        q.clock.advance(1)
        q.add(key(name))  # a sent, b ready
    first = q.claim_next("w1")
    assert first.key == key("a")
    q.add_rate_limited(key("a"))  # a failure on record, and a retry delayed
    q.clock.advance(1)
    q.add(key("a"))  # dirty while it runs (after b was queued)
    nxt = q.done_then_claim_next(key("a"), "w1", "w2", forget=True)
    assert nxt is not None and (nxt.key, nxt.owner) == (key("b"), "w2")  # b was queued before a changed
    assert q.failures(key("a")) == 0 and q.snapshot().processing_count == 1
    assert q.top_up() == []  # a is held ready: no task (a's own task still holds the cap's place)
    last = q.done_then_claim_next(key("b"), "w2", "w3", requeue_after=5.0)
    assert last is not None and last.key == key("a") and last.owner == "w3"  # the held key, taken by the drain
    assert [d.key for d in q.snapshot().backing_off] == [key("b")]  # b: queued again in 5 s
    assert q.done_then_claim_next(key("a"), "someone-else", "w4") is None  # not its lease: a stays processing
    assert q.snapshot().processing_count == 1


def test_top_up_sends_ready_keys_while_fewer_than_the_cap_wait(queue):
    q = queue(max_sent=2)
    for name in "abcde":
        q.clock.advance(1)
        q.add(key(name))
    assert q.top_up() == []  # a and b wait for workers
    q.claim(key("a"), "w")
    assert q.top_up() == keys("c")
    q.claim(key("b"), "w")
    q.claim(key("c"), "w")
    assert q.top_up() == keys("d", "e")
    assert q.top_up() == []
    assert [q.claim_next("w").key for _ in range(2)] == keys("d", "e") and q.claim_next("w") is None


def test_an_expired_lease_at_the_cap_leaves_its_key_ready_for_a_drainer(queue):
    q = queue(max_sent=1, redispatch_after=30)  # b's task is not overdue yet
    q.add(key("a"))
    q.claim(key("a"), "dead")
    q.add(key("b"))  # sent: fills the cap
    q.clock.advance(11)
    assert q.reap_expired() == []  # a is queued again, but the cap is full
    assert [q.claim_next("w").key for _ in range(2)] == keys("b", "a")  # b was queued first


def test_no_cap_sends_every_ready_key_as_before(queue):
    q = queue(max_sent=0)
    assert q.add_many(keys(*"abcdef")) == keys(*"abcdef")
    assert q.top_up() == []


def test_a_negative_cap_is_refused(redis_client):
    with pytest.raises(ValueError):
        WorkQueue(redis_client, name="bad", max_sent=-1)


def _lingerers(q: WorkQueue) -> int:
    return q.redis.zcard(q.keys[10])


def test_a_key_becoming_ready_wakes_a_lingering_worker_and_is_not_sent(queue):
    """An idle worker lingering for the next key (`wait_for_key`) gets it without a Celery message: the key is
    held for it (the caller dispatches nothing) and wakes it at once."""
    q = queue(max_sent=32)
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(q.wait_for_key("lingerer", "w1", 5.0)))
    waiter.start()
    deadline = time.monotonic() + 5
    while not _lingerers(q) and time.monotonic() < deadline:
        time.sleep(0.005)
    started = time.monotonic()
    assert q.add(key("a")) is False  # held for the lingerer: no task to send
    waiter.join(5)
    assert time.monotonic() - started < 1.0  # woken, not timed out
    assert got[0] is not None and got[0].key == key("a") and got[0].owner == "w1"
    assert _lingerers(q) == 0 and q.redis.llen(q.keys[11]) == 0
    assert q.add(key("b")) is True  # nobody lingers now: sent as before


def test_one_key_is_held_per_idle_lingerer_the_others_are_sent(queue):
    q = queue(max_sent=32)
    q._run("linger", "l1", "5")
    assert q.add_many_queued(keys("a", "b", "c")) == (keys("b", "c"), keys("a"))  # a wakes l1; b, c get tasks
    q._run("linger", "l2", "5")
    assert q.add_many_queued(keys("d", "e")) == (keys("e"), keys("d"))
    claim = q._next_claim("w1", q._run("unlinger_next", "l1", "w1", "10"))
    assert claim is not None and claim.key == key("a")  # the longest queued


def test_a_lingerer_killed_while_waiting_strands_nothing(queue):
    """Its registration lapses (`timeout` + 1 s): later keys are sent again; a key held for it meanwhile is sent by
    `top_up` (the controller's pump, every 0.2 s)."""
    q = queue(max_sent=32)
    q._run("linger", "dead", "2")
    assert q.add(key("a")) is False  # held for a lingerer that never wakes
    assert q.top_up() == keys("a")  # the pump sends it
    q.clock.now += 3  # the registration lapsed
    assert q.add(key("b")) is True


def test_a_lingerer_that_times_out_takes_a_key_waiting_ready_but_not_one_a_task_was_sent_for(queue):
    q = queue(max_sent=1)
    assert q.add(key("a")) is True  # sent: nobody lingers
    assert q.add(key("b")) is False  # beyond the cap: ready, no task
    claim = q.wait_for_key("lingerer", "w1", 0.05)  # no wake: on the timeout it looks anyway
    assert claim is not None and claim.key == key("b")
    assert q.wait_for_key("lingerer", "w1", 0.05) is None and _lingerers(q) == 0  # a is its task's


def test_a_lingerer_whose_wait_breaks_unregisters_and_claims_nothing(queue, monkeypatch):
    q = queue(max_sent=32)
    assert q.add(key("a")) is True

    def broken(*args, **kwargs):
        raise ConnectionError("redis went away")

    monkeypatch.setattr(q.redis, "blpop", broken)
    with pytest.raises(ConnectionError):
        q.wait_for_key("lingerer", "w1", 1.0)
    assert _lingerers(q) == 0
    assert q.snapshot().processing_count == 0  # nothing claimed that nobody would run


def test_an_idle_lingerer_is_woken_even_when_the_cap_of_sent_keys_is_reached(queue):
    q = queue(max_sent=1)
    assert q.add(key("a")) is True  # sent: the cap is reached
    q._run("linger", "l1", "5")
    assert q.add_many_queued(keys("b", "c")) == ([], keys("b", "c"))  # b held for l1 (woken), c ready
    assert q.redis.llen(q.keys[11]) == 1


def test_a_manual_request_s_key_is_sent_not_held_and_a_lingerer_leaves_it_to_its_task(queue):
    """`add(direct=True)` (dispatch.enqueue_now) is never held for a lingerer, and a lingerer takes only keys no
    task was sent for: the request's task runs the key, in the request's trace."""
    q = queue(max_sent=32)
    q._run("linger", "l1", "5")
    assert q.add(key("manual"), direct=True) is True and q.redis.llen(q.keys[11]) == 0
    assert q._next_claim("w1", q._run("unlinger_next", "l1", "w1", "10")) is None  # left to its task
    claim = q.claim(key("manual"), "task", only_if_dirty=True)
    assert claim is not None


def test_at_most_cap_lingerers_of_one_worker_node_wait_at_once(queue):
    """A worker node lets `cap` of its processes linger (its concurrency − 1): one more of the same node is refused
    at once and registers nothing, another node's is not concerned; a slot comes free when a lingerer leaves."""
    from reconcilers.engine.workqueue import LingerRefused

    q = queue(max_sent=32)
    assert q._run("linger", "node-a|p1", "5", "node-a|", "1") == 1
    started = time.monotonic()
    with pytest.raises(LingerRefused):
        q.wait_for_key("p2", "w2", 5.0, group="node-a|", cap=1)
    assert time.monotonic() - started < 1.0  # refused without waiting
    assert q.redis.zrange(q.keys[10], 0, -1) == [b"node-a|p1"]
    assert q._run("linger", "node-b|p1", "5", "node-b|", "1") == 1  # another node has a slot of its own
    assert q._run("linger", "node-a|p1", "5", "node-a|", "1") == 1  # renewing its own registration is no second one
    with pytest.raises(LingerRefused):
        q.wait_for_key("p3", "w3", 5.0, group="node-a|", cap=0)  # a node of one process never lingers
    q._run("unlinger_next", "node-a|p1", "", "")
    assert q.wait_for_key("p2", "w2", 0.05, group="node-a|", cap=1) is None  # its turn now: waited, timed out


def test_a_long_linger_blocks_in_slices_and_is_still_woken_by_a_key(queue, monkeypatch):
    """A linger longer than the Redis client's socket timeout (redis-py's default: 5 s) blocks in slices of
    `_BLOCK_SLICE` (reconcilers.engine.workqueue.lingering); a key held for it in a later slice still wakes it."""
    from reconcilers.engine.workqueue import lingering as wq

    monkeypatch.setattr(wq, "_BLOCK_SLICE", 0.1)
    q = queue(max_sent=32)
    threading.Timer(0.35, lambda: q.add(key("late"))).start()
    started = time.monotonic()
    claim = q.wait_for_key("lingerer", "w1", 3.0)
    assert claim is not None and claim.key == key("late")
    assert 0.3 < time.monotonic() - started < 1.5
    started = time.monotonic()
    assert q.wait_for_key("lingerer", "w1", 0.35) is None  # nothing comes: it waits its whole timeout, no longer
    assert 0.3 < time.monotonic() - started < 1.0
