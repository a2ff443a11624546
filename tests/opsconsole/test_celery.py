"""The Celery app is configured for at-least-once delivery, a task round-trips through a real worker, and a
worker tells the runner how many of its processes may linger."""

from __future__ import annotations

import pytest
from celery.concurrency import prefork, solo
from django.conf import settings

from opsconsole.celery import app, worker_processes
from opsconsole.tasks import ping


def test_celery_is_configured_for_at_least_once_delivery() -> None:
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json"
    assert conf.accept_content == ["json"]
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    assert conf.broker_url == settings.REDIS_URL


@pytest.mark.integration
def test_the_smoke_task_round_trips_through_a_real_worker(celery_worker) -> None:
    result = ping.apply_async(args=["hello"], queue=celery_worker.queue)
    answer = result.get(timeout=30)
    assert answer["echo"] == "hello"
    assert answer["pid"] in celery_worker.children()
    # the child's start-up (and its parent's, before the fork) is frozen out of the garbage collector's reach
    assert answer["gc_frozen"] > 10000


class _Worker:
    def __init__(self, pool_cls, concurrency, autoscale=None, min_concurrency=None):
        self.pool_cls, self.concurrency, self.autoscale = pool_cls, concurrency, autoscale
        self.min_concurrency = min_concurrency if min_concurrency is not None else concurrency


def test_a_worker_s_processes_are_its_concurrency_the_autoscaler_s_minimum_or_one_for_the_solo_pool() -> None:
    assert worker_processes(_Worker(prefork.TaskPool, 4)) == 4
    assert worker_processes(_Worker(prefork.TaskPool, 10, autoscale=(10, 3), min_concurrency=3)) == 3
    assert worker_processes(_Worker(prefork.TaskPool, 10, autoscale=(10, 0), min_concurrency=0)) == 1
    assert worker_processes(_Worker(solo.TaskPool, 8)) == 1
    assert worker_processes(object()) == 1
