"""The decision recorder survives what used to end its thread for good: a Redis restart under it (a private
`redis-server` without persistence, killed while a decision is in hand and started again empty), an item on its
queue that is not a decision, and its thread dying anyway (restarted, counted, `/healthz` failing meanwhile)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
import redis as redis_lib
from django.conf import settings

from kubesim.testing import wait_for
from opsconsole.webhooks import recorder as recorder_module
from opsconsole.webhooks import server as server_module
from opsconsole.webhooks.recorder import UNREADABLE, DecisionRecorder
from reconcilers.core.reconciler import AdmissionUser
from reconcilers.engine.admission import Decision
from reconcilers.models import ActionRecord
from tests.support.redis_server import RedisServer
from tests.support.webhooks_mtls import mtls_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PATH = "/validate/cache.example.com/memcacheds"


def decision(name: str) -> Decision:
    return Decision("validate", str(uuid.uuid4()), "Memcached", "cache.example.com", "team-a", name, "UPDATE",
                    AdmissionUser("alice", ("devs",), "u-1"), False)


def on_record(d: Decision) -> int:
    return ActionRecord.objects.filter(action="admission.validate", detail__uid=d.uid).count()


@pytest.fixture
def private_redis(tmp_path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_decisions_made_before_during_and_after_a_redis_restart_are_each_recorded_once(private_redis, monkeypatch):
    real_write = recorder_module.decision_record
    restarted, killed = threading.Event(), threading.Event()

    def back_up() -> None:
        private_redis.start()
        restarted.set()

    def write_while_redis_restarts(d: Decision, path: str) -> object:
        if not killed.is_set():  # the first decision in hand: Redis is killed, and still down when it is written
            killed.set()
            private_redis.kill()
            threading.Timer(1.5, back_up).start()  # back, empty, a moment later
        return real_write(d, path)

    monkeypatch.setattr(recorder_module, "decision_record", write_while_redis_restarts)
    rec = DecisionRecorder(f"r-{uuid.uuid4().hex[:8]}", redis_url=private_redis.url(), lease_seconds=2).start()
    try:
        before = [decision(f"before-{i}") for i in range(3)]
        for d in before:
            rec.put(d, PATH)
        wait_for(restarted.is_set, timeout=30)
        during = [decision(f"during-{i}") for i in range(3)]
        for d in during:  # Redis just came back: the recorder's connections to it are dead
            rec.put(d, PATH)
        wait_for(lambda: all(on_record(d) == 1 for d in during), timeout=30)
        private_redis.kill()  # and once more down while decisions come: they wait in memory
        down = [decision(f"down-{i}") for i in range(3)]
        for d in down:
            rec.put(d, PATH)
        private_redis.start()
        after = [decision(f"after-{i}") for i in range(3)]
        for d in after:
            rec.put(d, PATH)
        everything = before + during + down + after
        # `before` beyond the first were in the Redis that was lost: what a Redis without persistence loses
        kept = [before[0], *during, *down, *after]
        wait_for(lambda: all(on_record(d) == 1 for d in kept), timeout=60)
        assert rec.alive() and rec.problem() == ""
    finally:
        rec.stop()
    assert all(on_record(d) <= 1 for d in everything)


def test_an_item_that_is_not_a_decision_is_set_aside_on_record_and_the_next_one_is_written():
    rec = DecisionRecorder(f"p-{uuid.uuid4().hex[:8]}")
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    try:
        client.lpush(rec.pending_key, PATH + "\n{not a decision")
        client.lpush(rec.pending_key, b"\xff\xfe not even text")
        good = decision("after-poison")
        rec.put(good, PATH)
        rec.start()
        wait_for(lambda: on_record(good) == 1, timeout=15)
        assert rec.alive() and rec.set_aside == 2
        assert client.llen(rec.poison_key) == 2 and client.llen(rec.processing_key) == 0
        notes = ActionRecord.objects.filter(action=UNREADABLE)
        assert notes.count() >= 2 and all(n.detail["queue"] == rec.poison_key for n in notes)
    finally:
        rec.stop()
        for key in (rec.pending_key, rec.poison_key, rec.processing_key):
            client.delete(key)


def test_a_dead_recorder_thread_fails_healthz_and_is_restarted_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(server_module, "SUPERVISE_SECONDS", 3600.0)  # the test looks in between
    server, files = mtls_server(tmp_path)
    try:
        rec = server.recorder
        rec._abandon.set()  # the thread ends as if killed by something no loop catches
        rec._thread.join(10)
        rec._abandon.clear()
        assert not rec.alive()
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.metrics_url() + "/healthz", timeout=10)
        assert info.value.code == 503 and b"not running" in info.value.read()
        assert rec.supervise() is True
        wait_for(rec.alive, timeout=10)
        with urllib.request.urlopen(server.metrics_url() + "/healthz", timeout=10) as resp:
            assert resp.read() == b"ok"
        with urllib.request.urlopen(server.metrics_url() + "/metrics", timeout=10) as resp:
            page = resp.read().decode()
        assert 'opsconsole_thread_restarts_total{thread="admission-recorder"} 1.0' in page
        d = decision("after-restart")
        rec.put(d, PATH)
        wait_for(lambda: on_record(d) == 1, timeout=15)
    finally:
        server.stop()


def test_a_recorder_that_makes_no_progress_fails_healthz(monkeypatch):
    rec = DecisionRecorder(f"s-{uuid.uuid4().hex[:8]}", stuck_seconds=0.5)
    monkeypatch.setattr(recorder_module, "decision_record",
                        lambda d, p: (_ for _ in ()).throw(recorder_module.DatabaseError("database away")))
    rec.start()
    try:
        rec.put(decision("stuck"), PATH)
        assert "no progress" in wait_for(rec.problem, timeout=15)
    finally:
        rec.crash()
