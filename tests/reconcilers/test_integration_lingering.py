"""End to end, lingering workers: of a worker node's processes, at most all but one linger idle for the next key
(`runner.linger_slots`, set from Celery's `celeryd_after_setup`), so a manual request sent to the node runs at once
instead of waiting behind lingerers. One worker of two processes, lingering 20 s."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubesim.testing import wait_for
from opsconsole.celery import app
from reconcilers.engine import dispatch, kube
from reconcilers.models import ReconcileRun, Resource
from tests.fixtures.cluster import package_kubesim
from tests.fixtures.engines import Engine, engine_running
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LINGER_SECONDS = 20

#: a kubesim of this module's own: its engine's controller watches every namespace, and objects earlier modules
#: left in a shared kubesim would keep the two processes busy, so that which one lingers could not be observed
kubesim = package_kubesim("module")


@pytest.fixture(scope="module")
def engine(kubesim, redis_client, django_db_setup, django_db_blocker) -> Iterator[Engine]:
    """This module's engine: a controller and one worker of two processes that linger."""
    env = {"OPSCONSOLE_DRAIN_LINGER_SECONDS": str(LINGER_SECONDS)}
    with engine_running(kubesim, django_db_blocker, prefix="test-d-linger", extra_env=env, workers=(2,)) as running:
        yield running
        running.workqueue().redis.delete(running.workqueue().keys[11])  # no lingerer keeps the stop waiting
        running.workers[0].stop(timeout=LINGER_SECONDS + 10)


def lingerers(engine: Engine) -> list[str]:
    queue = engine.workqueue()
    return [m.decode() for m in queue.redis.zrangebyscore(queue.keys[10], queue.now(), "+inf")]


def test_one_of_two_processes_lingers_and_the_other_runs_a_manual_request_at_once(integration, kapi, namespace):
    made = []
    for name in ("l1", "l2"):
        obj = kube.create_object(kapi, GADGET, gadget(namespace, name, mode="ok"))
        made.append((GADGET.request(namespace, name).key(), obj["metadata"]["uid"]))
    for _, uid in made:
        wait_for(lambda uid=uid: Resource.objects.filter(uid=uid, phase="Running").exists(), timeout=30, interval=0.1)
    # a task for each key straight to the broker at once: each process runs one, drains, and wants to linger
    for key, _ in made:
        app.send_task("reconcilers.reconcile", args=[key], queue=integration.queue_name)
    wait_for(lambda: lingerers(integration), timeout=30, interval=0.05)
    seen = set()
    for _ in range(30):  # 1.5 s: the other process finished too and was refused
        seen |= set(lingerers(integration))
        time.sleep(0.05)
    assert len(seen) == 1, seen  # one process of the node (its name, then the process) lingers, not both
    node = seen.pop().split("|")[0]
    assert node.startswith(f"{integration.workers[0].name}@") and node.rsplit("/", 1)[1].isdigit()  # `<node>/<pid>`

    key, uid = made[0]
    before = ReconcileRun.objects.filter(key=key).count()
    asked = time.monotonic()
    previous, app.conf.task_default_queue = app.conf.task_default_queue, integration.queue_name
    try:
        assert dispatch.enqueue_now(key)  # a manual request's task, to the engine's queue: never held for a lingerer
    finally:
        app.conf.task_default_queue = previous
    wait_for(lambda: ReconcileRun.objects.filter(key=key).count() > before, timeout=LINGER_SECONDS, interval=0.05)
    assert time.monotonic() - asked < LINGER_SECONDS / 4  # the free process ran it; it did not wait for the lingerer
    assert lingerers(integration)  # while the lingerer still lingers
