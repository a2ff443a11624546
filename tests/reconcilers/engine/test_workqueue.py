"""The workqueue's rules, against the real Redis at REDIS_URL, with an injected clock (no sleeping)."""

from __future__ import annotations

import multiprocessing
import queue as queue_lib
import threading
import time
import uuid

import pytest
import redis as redis_lib
from django.conf import settings

from reconcilers.engine.workqueue import Claim, WorkQueue

KEY = "cache.example.com/v1alpha1/memcacheds/default/web"


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_queue(redis_client, clock):
    made: list[WorkQueue] = []

    def make(**kwargs) -> WorkQueue:
        kwargs.setdefault("clock", clock)
        q = WorkQueue(redis_client, name=f"test-{uuid.uuid4().hex[:10]}", **kwargs)
        made.append(q)
        return q

    yield make
    for q in made:
        q.clear()
        assert not list(redis_client.scan_iter(match=q.prefix + "*"))


@pytest.fixture
def wq(make_queue) -> WorkQueue:
    return make_queue()


def test_a_hundred_adds_of_one_key_queue_it_once(wq: WorkQueue) -> None:
    results = [wq.add(KEY) for _ in range(100)]
    assert results.count(True) == 1 and results[0] is True
    snap = wq.snapshot()
    assert snap.depth == 1 and [p.key for p in snap.pending] == [KEY]


def test_add_many_queues_each_key_once_and_names_only_the_newly_queued(wq: WorkQueue) -> None:
    other, busy = KEY + "-2", KEY + "-busy"
    assert wq.add(other) is True
    assert wq.add(busy) and wq.claim(busy, "w1") is not None
    assert wq.add_many([KEY, other, busy, KEY]) == [KEY]  # other coalesced, busy processing, KEY once
    assert wq.add_many([]) == []
    assert sorted(p.key for p in wq.snapshot().pending) == [KEY, other]
    assert wq.done(busy, "w1") is True  # the add while processing re-queues it once


def test_depths_count_waiting_and_running_keys_per_kind(wq: WorkQueue, clock: FakeClock) -> None:
    tenant = "tenancy.example.com/v1alpha1/tenants//acme"
    for name in ("a", "b", "c"):
        wq.add(f"cache.example.com/v1alpha1/memcacheds/default/{name}")
    wq.add(tenant)
    wq.claim("cache.example.com/v1alpha1/memcacheds/default/a", "w1")
    clock.advance(2)
    wq.claim(tenant, "w2")
    clock.advance(1)
    depths = wq.depths()
    assert set(depths) == {"cache.example.com/v1alpha1/memcacheds", "tenancy.example.com/v1alpha1/tenants"}
    memcached, tenants = depths["cache.example.com/v1alpha1/memcacheds"], depths["tenancy.example.com/v1alpha1/tenants"]
    assert (memcached.pending, memcached.unfinished_seconds, memcached.longest_running_seconds) == (2, 3.0, 3.0)
    assert (tenants.pending, tenants.unfinished_seconds, tenants.longest_running_seconds) == (0, 1.0, 1.0)


def test_depths_count_the_keys_of_every_cluster_under_their_kind(wq: WorkQueue) -> None:
    wq.add("cache.example.com/v1alpha1/memcacheds/default/a")
    wq.add("eu-1/cache.example.com/v1alpha1/memcacheds/default/a")  # the same object's name in cluster eu-1
    wq.add("eu-1/tenancy.example.com/v1alpha1/tenants//acme")
    depths = wq.depths()
    assert {p: d.pending for p, d in depths.items()} == {"cache.example.com/v1alpha1/memcacheds": 2,
                                                          "tenancy.example.com/v1alpha1/tenants": 1}


def test_a_key_added_while_processing_is_requeued_exactly_once_by_done(wq: WorkQueue) -> None:
    assert wq.add(KEY)
    assert wq.claim(KEY, "w1") is not None
    assert [wq.add(KEY) for _ in range(5)] == [False] * 5
    assert wq.snapshot().depth == 0  # dirty while processing is not waiting for a worker yet
    assert wq.done(KEY, "w1") is True
    assert wq.claim(KEY, "w2") is not None
    assert wq.done(KEY, "w2") is False  # nothing arrived during the second run
    assert wq.add(KEY) is True  # idle again: a new add queues it


def test_a_key_that_became_dirty_is_held_for_the_caller_s_drain_not_sent(wq: WorkQueue) -> None:
    wq.add(KEY)
    wq.claim(KEY, "w1")
    wq.add(KEY)  # a child changed during the run
    assert wq.done(KEY, "w1", hold=True) is False  # nothing to dispatch
    assert [p.key for p in wq.snapshot().pending] == [KEY]  # ready, no task sent
    nxt = wq.claim_next("w1")  # the same worker's drain takes it
    assert nxt is not None and nxt.key == KEY
    wq.add(KEY)
    assert wq.done(KEY, "w1", hold=True) is False
    assert wq.top_up() == [KEY]  # a drain that stopped first: its top-up sends it


def test_done_without_new_adds_leaves_the_queue_empty(wq: WorkQueue) -> None:
    wq.add(KEY)
    wq.claim(KEY, "w1")
    assert wq.done(KEY, "w1") is False
    snap = wq.snapshot()
    assert (snap.depth, snap.processing_count, snap.delayed_count) == (0, 0, 0)


def test_a_second_claim_is_refused_while_the_lease_is_held(wq: WorkQueue, clock: FakeClock) -> None:
    wq.add(KEY)
    first = wq.claim(KEY, "w1")
    assert isinstance(first, Claim) and first.lease_expires == clock.now + 30.0
    clock.advance(29.9)
    assert wq.claim(KEY, "w2") is None
    # the refused claim keeps the key dirty, so the holder's done() re-queues it
    assert wq.done(KEY, "w1") is True


def test_a_claim_takes_over_an_expired_lease_and_the_old_owner_can_no_longer_release_it(
    wq: WorkQueue, clock: FakeClock
) -> None:
    wq.add(KEY)
    wq.claim(KEY, "w1")
    clock.advance(30.1)
    second = wq.claim(KEY, "w2")
    assert second is not None and second.owner == "w2"
    assert wq.renew(KEY, "w1") is False
    assert wq.done(KEY, "w1") is False
    assert [p.owner for p in wq.snapshot().processing] == ["w2"]
    assert wq.claim(KEY, "w3") is None


def test_renew_extends_the_lease_for_its_owner_only(wq: WorkQueue, clock: FakeClock) -> None:
    wq.add(KEY)
    wq.claim(KEY, "w1")
    clock.advance(20)
    assert wq.renew(KEY, "w1") is True
    assert wq.renew(KEY, "intruder") is False
    clock.advance(20)  # 40 s after the claim, 20 s after the renewal
    assert wq.claim(KEY, "w2") is None
    assert wq.reap_expired() == []
    assert wq.snapshot().processing[0].lease_expires == clock.now + 10


def test_claim_reports_when_the_key_was_queued_and_its_failures(wq: WorkQueue, clock: FakeClock) -> None:
    queued_at = clock.now
    wq.add(KEY)
    clock.advance(2.5)
    claim = wq.claim(KEY, "w1")
    assert claim is not None
    assert (claim.queued_at, claim.claimed_at, claim.failures) == (queued_at, queued_at + 2.5, 0)
    wq.add_rate_limited(KEY)
    wq.done(KEY, "w1")
    clock.advance(1)
    assert wq.release_due() == [KEY]
    assert wq.claim(KEY, "w2").failures == 1


def test_backoff_doubles_per_failure_up_to_the_cap_and_forget_resets_it(make_queue, clock: FakeClock) -> None:
    wq = make_queue(backoff_base=1.0, backoff_cap=10.0, bucket_qps=0)
    delays = []
    for _ in range(6):
        delays.append(wq.add_rate_limited(KEY))
        clock.advance(delays[-1])
        assert wq.release_due() == [KEY]
        wq.claim(KEY, "w")
        wq.done(KEY, "w")
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert wq.failures(KEY) == 6
    wq.forget(KEY)
    assert wq.failures(KEY) == 0
    assert wq.add_rate_limited(KEY) == 1.0


def test_done_can_reset_the_failures_in_the_same_round_trip(make_queue, clock: FakeClock) -> None:
    wq = make_queue(backoff_base=1.0, backoff_cap=10.0, bucket_qps=0)
    for _ in range(3):
        clock.advance(wq.add_rate_limited(KEY))
        wq.release_due()
        wq.claim(KEY, "w")
        wq.done(KEY, "w")
    assert wq.failures(KEY) == 3
    clock.advance(wq.add_rate_limited(KEY))
    wq.release_due()
    claim = wq.claim(KEY, "w")
    assert claim is not None and claim.failures == 4
    assert wq.add(KEY) is False  # re-added while processing: done() hands it back
    assert wq.done(KEY, "w", forget=True) is True  # the success: lease released, failures reset, key dirty again
    assert wq.failures(KEY) == 0
    assert wq.claim(KEY, "w2").failures == 0


def test_backoff_defaults_are_controller_runtimes(make_queue, clock: FakeClock) -> None:
    wq = make_queue(bucket_qps=0)
    delays = []
    for _ in range(3):
        delays.append(wq.add_rate_limited(KEY))
        clock.advance(delays[-1])
        wq.release_due()
    assert delays == pytest.approx([0.005, 0.01, 0.02])
    wq.reset_backoff(KEY)
    assert wq.add_rate_limited(KEY) == pytest.approx(0.005)
    wq.redis.hset(wq.keys[4], KEY, 30)  # 0.005 * 2**30 s is far beyond the cap
    assert wq.add_rate_limited(KEY) == pytest.approx(0.005)  # an earlier retry already scheduled wins
    clock.advance(1)
    wq.release_due()
    assert wq.add_rate_limited(KEY) == 1000.0


def test_the_token_bucket_delays_retries_beyond_its_burst_across_keys(make_queue, clock: FakeClock) -> None:
    wq = make_queue(backoff_base=0.001, bucket_qps=10, bucket_burst=3)
    delays = [wq.add_rate_limited(f"{KEY}-{i}") for i in range(6)]
    # three tokens, then one token every 0.1 s; the larger of backoff and bucket wait applies (MaxOf)
    assert delays == pytest.approx([0.001, 0.001, 0.001, 0.1, 0.2, 0.3])
    clock.advance(10)  # the bucket refills to its burst, no more
    wq.release_due()
    delays = [wq.add_rate_limited(f"{KEY}-x{i}") for i in range(4)]
    assert delays == pytest.approx([0.001, 0.001, 0.001, 0.1])


def test_delayed_keys_are_released_when_due_in_due_order(wq: WorkQueue, clock: FakeClock) -> None:
    wq.add_after("a", 3)
    wq.add_after("b", 1)
    wq.add_after("c", 2)
    clock.advance(0.5)
    assert wq.release_due() == []
    clock.advance(0.5)
    assert wq.release_due() == ["b"]
    clock.advance(2)
    assert wq.release_due() == ["c", "a"]
    assert wq.release_due() == []
    # queued at their due time, so they wait in due order
    assert [(p.key, p.queued_at) for p in wq.snapshot().pending] == [
        ("b", clock.now - 2), ("c", clock.now - 1), ("a", clock.now)]


def test_the_earlier_due_time_wins_for_a_key_delayed_twice(wq: WorkQueue, clock: FakeClock) -> None:
    wq.add_after("late-then-soon", 10)
    wq.add_after("late-then-soon", 1)
    wq.add_after("soon-then-late", 1)
    wq.add_after("soon-then-late", 10)
    clock.advance(1)
    assert sorted(wq.release_due()) == ["late-then-soon", "soon-then-late"]


def test_a_due_key_already_pending_or_processing_is_not_dispatched_twice(wq: WorkQueue, clock: FakeClock) -> None:
    wq.add_after("pending", 1)
    wq.add_after("busy", 1)
    assert wq.add("busy")
    wq.claim("busy", "w")
    wq.add_after("busy", 1)  # RequeueAfter from inside the running reconcile
    wq.add("pending")  # supersedes its delayed retry: it is reconciled now
    assert wq.snapshot().delayed_count == 1
    clock.advance(1)
    assert wq.release_due() == []  # busy is processing: marked dirty instead
    assert wq.done("busy", "w") is True


def test_reap_requeues_a_key_whose_lease_expired(wq: WorkQueue, clock: FakeClock) -> None:
    wq.add(KEY)
    wq.claim(KEY, "killed")
    clock.advance(29)
    assert wq.reap_expired() == []
    clock.advance(2)
    assert wq.reap_expired() == [KEY]
    assert wq.reap_expired() == []
    snap = wq.snapshot()
    assert [p.key for p in snap.pending] == [KEY] and snap.processing == []
    assert wq.claim(KEY, "w2") is not None
    assert wq.done(KEY, "killed") is False


def test_reap_redispatches_a_dirty_key_whose_task_was_never_claimed(make_queue, clock: FakeClock) -> None:
    wq = make_queue(redispatch_after=60, lease_seconds=1000)
    assert wq.add(KEY)  # ... and the process dies before sending the task
    wq.add("claimed")
    wq.claim("claimed", "w")
    clock.advance(61)
    assert wq.add(KEY) is False  # the resync's add is coalesced
    assert wq.reap_expired() == [KEY]
    assert wq.reap_expired() == []
    clock.advance(61)
    assert wq.reap_expired() == [KEY]


def test_snapshot_shows_pending_processing_and_backing_off(wq: WorkQueue, clock: FakeClock) -> None:
    t0 = clock.now
    wq.add("p1")
    clock.advance(1)
    wq.add("p2")
    wq.add("busy")
    wq.claim("busy", "host:1:abc")
    wq.add("busy")
    wq.add_rate_limited("failing")
    wq.add_rate_limited("failing")  # earlier retry kept, failures counted
    wq.add_after("later", 60)
    snap = wq.snapshot()
    assert snap.now == t0 + 1 and snap.depth == 2 and snap.processing_count == 1 and snap.delayed_count == 2
    assert [(p.key, p.queued_at) for p in snap.pending] == [("p1", t0), ("p2", t0 + 1)]
    (busy,) = snap.processing
    assert (busy.key, busy.owner, busy.since, busy.lease_expires, busy.dirty) == (
        "busy", "host:1:abc", t0 + 1, t0 + 31, True)
    assert [(d.key, d.failures, d.next_retry) for d in snap.backing_off] == [
        ("failing", 2, pytest.approx(t0 + 1.005)), ("later", 0, t0 + 61)]
    as_dict = snap.as_dict()
    assert as_dict["pending"][0] == {"key": "p1", "queued_at": t0} and as_dict["name"] == wq.name
    assert len(wq.snapshot(limit=1).pending) == 1


def test_retry_now_releases_a_backing_off_key_and_reset_backoff_clears_failures(
    make_queue, clock: FakeClock
) -> None:
    wq = make_queue(backoff_base=100)
    wq.add_rate_limited(KEY)
    wq.add_rate_limited(KEY)
    assert wq.retry_now("not-delayed") is False
    assert wq.retry_now(KEY) is True
    snap = wq.snapshot()
    assert snap.delayed_count == 0 and [p.key for p in snap.pending] == [KEY]
    assert wq.failures(KEY) == 2
    wq.reset_backoff(KEY)
    assert wq.failures(KEY) == 0


def test_queues_with_different_names_share_a_redis_without_interfering(make_queue) -> None:
    one, two = make_queue(), make_queue()
    assert one.add(KEY) and two.add(KEY)
    one.claim(KEY, "w1")
    assert two.claim(KEY, "w2") is not None
    assert all(k.startswith(one.prefix) for k in one.keys)
    one.clear()
    assert two.snapshot().processing_count == 1


def test_without_a_clock_the_queue_uses_the_redis_servers_time(make_queue, redis_client) -> None:
    wq = make_queue(clock=None, lease_seconds=5)
    seconds, micros = redis_client.time()
    claim = wq.claim(KEY, "w")
    assert claim is not None
    assert abs(claim.claimed_at - (seconds + micros / 1e6)) < 1.0
    assert claim.lease_expires == pytest.approx(claim.claimed_at + 5)


def test_invalid_parameters_are_refused(redis_client) -> None:
    with pytest.raises(ValueError):
        WorkQueue(redis_client, lease_seconds=0)
    with pytest.raises(ValueError):
        WorkQueue(redis_client, backoff_base=2, backoff_cap=1)


def test_threads_claiming_one_key_at_once_yield_exactly_one_owner(make_queue) -> None:
    wq = make_queue(clock=None)
    wq.add(KEY)
    barrier = threading.Barrier(16)
    won: list[str] = []

    def worker(i: int) -> None:
        barrier.wait()
        if wq.claim(KEY, f"t{i}") is not None:
            won.append(f"t{i}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert [p.owner for p in wq.snapshot().processing] == won


def _claim_in_process(url: str, name: str, owner: str, barrier, results) -> None:
    client = redis_lib.Redis.from_url(url)
    wq = WorkQueue(client, name=name)
    barrier.wait()
    results.put((owner, wq.claim(KEY, owner) is not None))


def test_processes_claiming_one_key_at_once_yield_exactly_one_owner(make_queue) -> None:
    wq = make_queue(clock=None)
    wq.add(KEY)
    # spawn, not fork: forking a test process that runs other threads (kubesim, span writers) can deadlock
    # the child on a lock one of those threads held at the fork.
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_claim_in_process, args=(settings.REDIS_URL, wq.name, f"p{i}", barrier, results))
             for i in range(4)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    winners = [owner for owner, won in outcomes if won]
    assert len(winners) == 1
    assert [p.owner for p in wq.snapshot().processing] == winners


def test_workers_racing_on_a_burst_never_overlap_and_leave_nothing_behind(make_queue) -> None:
    wq = make_queue(clock=None)
    tasks: queue_lib.Queue[str] = queue_lib.Queue()  # stands in for the Celery queue
    lock = threading.Lock()
    state = {"active": 0, "max_active": 0, "reconciles": 0}
    stop = threading.Event()

    def worker(i: int) -> None:
        while not stop.is_set():
            try:
                key = tasks.get(timeout=0.05)
            except queue_lib.Empty:
                continue
            owner = f"w{i}:{uuid.uuid4().hex[:6]}"
            if wq.claim(key, owner) is not None:
                with lock:
                    state["active"] += 1
                    state["max_active"] = max(state["max_active"], state["active"])
                    state["reconciles"] += 1
                time.sleep(0.002)  # the reconcile's work: leaves room for overlap, if any were possible
                with lock:
                    state["active"] -= 1
                if wq.done(key, owner):
                    tasks.put(key)
            tasks.task_done()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    try:
        for i in range(100):
            if wq.add(KEY):
                tasks.put(KEY)
            if i % 10 == 0:
                tasks.put(KEY)  # a duplicate delivery (a redelivered task) cannot break the rule either
        tasks.join()
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert state["max_active"] == 1
    assert 1 <= state["reconciles"] < 50
    snap = wq.snapshot()
    # every add was consumed by a claim that came after it: nothing dirty, nothing processing
    assert (snap.depth, snap.processing_count) == (0, 0)
    assert wq.redis.zcard(wq.keys[0]) == 0


def test_done_can_requeue_the_key_after_a_delay_in_the_same_round_trip(make_queue, clock) -> None:
    wq = make_queue(bucket_qps=0)
    wq.add(KEY)
    wq.claim(KEY, "w")
    assert wq.done(KEY, "w", forget=True, requeue_after=30) is False
    snap = wq.snapshot()
    assert snap.processing_count == 0 and [(d.key, d.next_retry) for d in snap.backing_off] == [
        (KEY, pytest.approx(clock.now + 30))]
    clock.advance(30)
    assert wq.release_due() == [KEY]
    wq.claim(KEY, "w2")
    wq.add(KEY)  # changed while it ran: sent at done(), the delayed retry kept for later
    assert wq.done(KEY, "w2", requeue_after=5) is True
    assert wq.snapshot().delayed_count == 1


def _pump_scene(q: WorkQueue, clock: FakeClock) -> None:
    """A delayed key coming due, a lease expiring, a key sent but never claimed, a key held ready beyond the cap."""
    q.add_after("due", 5.0)
    q.add("expires")
    assert q.claim("expires", "killed-worker") is not None
    for name in ("lost", "sent", "held"):  # the cap is 2: "held" waits ready, no task sent for it
        q.add(name)
    clock.advance(60.0)


def test_the_pump_is_release_due_then_reap_expired_then_top_up_in_one_round_trip(make_queue, clock) -> None:
    separate, fused = make_queue(max_sent=2), make_queue(max_sent=2)
    _pump_scene(separate, clock)
    clock.now -= 60.0
    _pump_scene(fused, clock)
    expected = separate.release_due() + separate.reap_expired() + separate.top_up()
    assert fused.pump() == list(dict.fromkeys(expected))
    assert {"lost", "sent"} <= set(expected)  # tasks never claimed: sent again
    assert fused.snapshot().depth == separate.snapshot().depth
    assert sorted(fused.snapshot().pending, key=lambda p: p.key) == sorted(separate.snapshot().pending,
                                                                           key=lambda p: p.key)
