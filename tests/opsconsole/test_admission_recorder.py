"""The admission recorder's promise: a decision the webhook answered is on record at least once and exactly once,
even when the recorder is killed with it in hand (the next recorder takes it over once the lease expired), when
the database refuses for a while, and when Redis is unreachable (it waits in memory)."""

from __future__ import annotations

import uuid
from unittest import mock

import pytest
import redis as redis_lib
from django.conf import settings
from django.db import OperationalError

from kubesim.testing import wait_for
from opsconsole.webhooks import recorder as recorder_module
from opsconsole.webhooks.recorder import DecisionRecorder
from reconcilers.core.reconciler import AdmissionUser
from reconcilers.engine.admission import Decision
from reconcilers.models import ActionRecord

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PATH = "/validate/cache.example.com/memcacheds"


def decision(name: str = "d", **changes: object) -> Decision:
    made = Decision("validate", str(uuid.uuid4()), "Memcached", "cache.example.com", "team-a", name, "CREATE",
                    AdmissionUser("alice", ("devs", "system:authenticated"), "u-1"), False)
    for key, value in changes.items():
        setattr(made, key, value)
    return made


def on_record(d: Decision) -> int:
    return ActionRecord.objects.filter(action="admission.validate", detail__uid=d.uid).count()


@pytest.fixture
def queue_name():
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(f"opsconsole:admission:{{{name}}}:*"):
        client.delete(key)


def test_a_decision_survives_as_json_unchanged():
    made = decision(allowed=False, code=422, reasons=["spec.size: must be at most 100"],
                    patch=[{"op": "add", "path": "/spec/port", "value": 1}], warnings=["w"], dry_run=True)
    assert Decision.from_json(made.to_json()) == made


def test_a_handed_over_decision_is_in_redis_before_it_is_written(queue_name):
    rec = DecisionRecorder(queue_name)  # not started: nothing writes
    d = decision()
    rec.put(d, PATH)
    assert rec.pending() == 1 and on_record(d) == 0
    rec.start()
    wait_for(lambda: on_record(d) == 1, timeout=10)
    rec.stop()
    assert rec.pending() == 0


def test_a_killed_recorders_decision_in_hand_is_written_by_the_next_one_once(queue_name):
    refusing = mock.patch.object(recorder_module, "decision_record", side_effect=OperationalError("db down"))
    first = DecisionRecorder(queue_name, instance="first", lease_seconds=1)
    d = decision("in-flight")
    with refusing:
        first.start()
        first.put(d, PATH)
        client = redis_lib.Redis.from_url(settings.REDIS_URL)
        wait_for(lambda: client.llen(first.processing_key) == 1, timeout=10)  # in hand, the database refusing
        first.crash()
    assert on_record(d) == 0 and client.llen(first.processing_key) == 1
    second = DecisionRecorder(queue_name, instance="second", lease_seconds=1).start()
    wait_for(lambda: on_record(d) == 1, timeout=15)  # after first's lease expired, second put it back and wrote it
    second.put(d, PATH)  # handed over again (at least once): still one record
    second.stop()
    assert on_record(d) == 1
    assert client.llen(first.processing_key) == 0 and second.pending() == 0


def test_a_live_recorders_decisions_in_hand_are_not_taken_over(queue_name):
    refusing = mock.patch.object(recorder_module, "decision_record", side_effect=OperationalError("db slow"))
    with refusing:
        slow = DecisionRecorder(queue_name, instance="slow", lease_seconds=30).start()
        slow.put(decision(), PATH)
        client = redis_lib.Redis.from_url(settings.REDIS_URL)
        wait_for(lambda: client.llen(slow.processing_key) == 1, timeout=10)
        other = DecisionRecorder(queue_name, instance="other", lease_seconds=30)
        assert other.reclaim() == 0  # its lease is renewed while it retries: nobody writes its decision twice
        slow.crash()


def test_the_database_refusing_for_a_while_delays_the_record_and_loses_nothing(queue_name):
    real = recorder_module.decision_record
    calls = {"n": 0}

    def flaky(d: Decision, path: str):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise OperationalError("connection refused")
        return real(d, path)

    with mock.patch.object(recorder_module, "decision_record", side_effect=flaky), \
            mock.patch.object(recorder_module, "RETRY_SECONDS", 0.05):
        rec = DecisionRecorder(queue_name).start()
        first, second = decision("one"), decision("two")
        rec.put(first, PATH)
        rec.put(second, PATH)
        wait_for(lambda: on_record(first) == 1 and on_record(second) == 1, timeout=15)
        rec.stop()
    assert calls["n"] == 4


def test_with_redis_unreachable_a_decision_waits_in_memory_and_is_written(queue_name):
    rec = DecisionRecorder(queue_name, redis_url="redis://127.0.0.1:1/0").start()
    d = decision("no-redis")
    rec.put(d, PATH)  # returns (within the put timeout), the decision kept in memory
    wait_for(lambda: on_record(d) == 1, timeout=10)
    rec.stop(timeout=2)
    record = ActionRecord.objects.get(action="admission.validate", detail__uid=d.uid)
    assert record.actor == "alice" and record.target == "Memcached team-a/no-redis"
    assert record.detail["groups"] == ["devs", "system:authenticated"]


def test_two_databases_sharing_a_redis_get_queues_of_their_own(settings):
    settings.OPSCONSOLE_ADMISSION_QUEUE = ""
    here = recorder_module.queue_name()
    with mock.patch.dict(recorder_module.connections["default"].settings_dict, {"NAME": "another_database"}):
        there = recorder_module.queue_name()
    assert here != there
    settings.OPSCONSOLE_ADMISSION_QUEUE = "fixed"
    assert recorder_module.queue_name() == "fixed"
