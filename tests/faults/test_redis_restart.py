"""The engine's Redis killed and restarted empty while CRs converge (no persistence: the workqueue, the leases
and the Celery messages are gone): the workers and the controller reconnect, the controller's full resync when the
workqueue answers again puts every key back (the periodic one, spread over its period, would too), nothing is
left stuck, every CR converges with each transition recorded once, and the audit chains verify.

The engine of this test has a Redis of its own (a `redis-server` subprocess on a free port), so the suite's
shared Redis is never restarted, and a kubesim of its own (tests/faults/isolated.py); this test process's
settings and Celery app point at them meanwhile."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubesim.testing import wait_for
from reconcilers.engine import dispatch
from reconcilers.models import ReconcileRun, Resource
from tests.faults.conftest import all_recorded, create_gadgets, phases
from tests.faults.isolated import Isolated, isolated_engine
from tests.fixtures.engines import LEASE_SECONDS, audit_intact
from tests.support.redis_server import RedisServer, celery_broker

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CRS = 20
RESYNC_SECONDS = 5.0  # the engine's periodic resync, spread over it (production: 36000 s)
DOWN_SECONDS = 1.0  # how long Redis stays away


def nothing_stuck(queue, rounds: int = 3) -> None:
    """No key left processing under a lease nobody renews: every key processing now is done within a few lease
    periods, and no lease is ever seen expired meanwhile. (Not "the queue goes idle": the periodic resync puts each
    key back once every RESYNC_SECONDS, and on a loaded machine a round of 20 slow reconciles can take longer than
    that.)"""
    first = {(p.key, p.since) for p in queue.snapshot().processing}
    deadline = time.monotonic() + rounds * LEASE_SECONDS + 10
    while True:
        snap = queue.snapshot()
        expired = [p for p in snap.processing if p.lease_expires < snap.now - 1.0]
        assert not expired, f"leases nobody renews: {expired}"
        if not first & {(p.key, p.since) for p in snap.processing}:
            return
        assert time.monotonic() < deadline, f"still processing after {rounds} leases: {snap.processing}"
        time.sleep(0.1)


class RedisEngine:
    def __init__(self, isolated: Isolated, redis: RedisServer) -> None:
        self.isolated, self.engine, self.redis = isolated, isolated.engine, redis

    def resyncs(self) -> int:
        """How many full resyncs (every key at once, after a workqueue outage) the controller has logged so far."""
        return self.engine.controller.log_path.read_text(errors="replace").count("controller: resync of")


@pytest.fixture
def redis_faults(transactional_db, settings, django_db_blocker, tmp_path) -> Iterator[RedisEngine]:
    """An isolated engine (tests/faults/isolated.py) on a private Redis, resync every RESYNC_SECONDS;
    afterwards stopped, then the audit verified."""
    redis = RedisServer(tmp_path / "redis").start()
    settings.REDIS_URL = redis.url()
    extra = {"REDIS_URL": redis.url(), "OPSCONSOLE_RESYNC_SECONDS": str(RESYNC_SECONDS)}
    try:
        with celery_broker(redis.url()), isolated_engine(django_db_blocker, settings, prefix="test-faults-redis",
                                                         extra_env=extra) as isolated:
            yield RedisEngine(isolated, redis)
    finally:
        redis.stop()
    audit_intact()


def test_redis_restarted_empty_mid_run_everything_reconnects_and_the_resync_recovers_every_key(
        redis_faults) -> None:
    engine, kapi, namespace = redis_faults.engine, redis_faults.isolated.api, redis_faults.isolated.namespace
    queue = dispatch.get_queue()
    uids = create_gadgets(kapi, namespace, CRS, "redis", mode="slow", sleepSeconds=0.3)
    wait_for(lambda: Resource.objects.filter(uid__in=uids.values(), phase="Running").count() >= 3, timeout=30,
             interval=0.05)
    pending_before = queue.snapshot().depth
    running_at_restart = Resource.objects.filter(uid__in=uids.values(), phase="Running").count()
    resyncs_before = redis_faults.resyncs()

    redis_faults.redis.restart(down_seconds=DOWN_SECONDS)
    restarted = time.monotonic()

    wait_for(lambda: all_recorded(uids, "Running"), timeout=60, interval=0.1)
    converged = time.monotonic() - restarted
    assert running_at_restart < CRS and pending_before > 0  # the restart fell mid-run, with keys still queued
    # the keys still queued at the restart saw no change since: only the resync could bring them back
    assert redis_faults.resyncs() > resyncs_before
    for name, uid in uids.items():
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], name
    runs = ReconcileRun.objects.filter(key__contains=f"/{namespace}/")
    assert runs.filter(result="success").values("key").distinct().count() == CRS

    nothing_stuck(queue)
    exits = redis_faults.isolated.exit_codes()
    assert all(code is None for code in exits.values()), exits  # all reconnected, none exited
    assert all(w.children() for w in engine.workers)
    errors = sorted(set(runs.filter(result="error").values_list("error_class", flat=True)))
    print(f"\nFAULT redis-restart: {CRS} CRs, {running_at_restart} Running and {pending_before} queued when Redis "
          f"was killed ({DOWN_SECONDS:.0f} s down, restarted empty); all Running {converged:.1f} s after the restart "
          f"({redis_faults.resyncs() - resyncs_before} resyncs since, periodic every {RESYNC_SECONDS:.0f} s); "
          f"{runs.count()} runs, {runs.filter(result='error').count()} error runs {errors}; workers and controller "
          "reconnected")
