"""Fixtures of the fault suite: a kubesim of its own (faults injected there never reach the rest of the
session), two real Celery workers and a controller process on it with short leases and a small backoff cap,
Redis and the test database. The engine harness comes from the root fixture plugin (tests/fixtures), the Gadget
test kind from tests/reconcilers.

Both are scoped to this directory and stopped after its last test: a controller left running on this kubesim
would go on writing to the test database, and its re-lists would record every other test's objects deleted
(its kubesim never had them)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reconcilers.engine import dispatch, kube, registry
from reconcilers.models import Resource, Transition
from tests.fixtures.cluster import package_kubesim
from tests.fixtures.engines import INTEGRATION_RECONCILERS, Engine, audit_intact, engine_running, wait_idle
from tests.reconcilers.testkinds import GADGET, gadget

kubesim = package_kubesim()  # a kubesim of this directory's own

#: the backoff of the fault engine: 50 ms doubling, capped at 2 s (production: 5 ms, 1000 s)
BACKOFF_BASE = 0.05
BACKOFF_CAP = 2.0


@pytest.fixture(scope="package")
def fault_engine(kubesim, redis_client, django_db_setup, django_db_blocker) -> Iterator[Engine]:
    """The engine the fault tests break: 2 workers (one pool child each) and a controller."""
    extra = {
        "OPSCONSOLE_WORKQUEUE_BACKOFF_BASE": str(BACKOFF_BASE),
        "OPSCONSOLE_WORKQUEUE_BACKOFF_CAP": str(BACKOFF_CAP),
    }
    with engine_running(kubesim, django_db_blocker, prefix="test-faults", extra_env=extra) as running:
        yield running


@pytest.fixture
def faults(fault_engine, transactional_db, kapi, settings) -> Iterator[Engine]:
    """The running fault engine for one test; afterwards: faults cleared, the engine idle, audit chains intact."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    settings.OPSCONSOLE_WORKQUEUE_NAME = fault_engine.queue_name
    settings.OPSCONSOLE_WORKQUEUE_BACKOFF_BASE = BACKOFF_BASE
    settings.OPSCONSOLE_WORKQUEUE_BACKOFF_CAP = BACKOFF_CAP
    registry.reset()
    try:
        yield fault_engine
    finally:
        fault_engine.kubesim.clear_faults()
    wait_idle(dispatch.get_queue(), timeout=60)
    audit_intact()
    registry.reset()


def with_retries(call: Callable[[], Any], attempts: int = 20) -> Any:
    """The test's own API calls under injected faults: retry 5xx/429 as a client would."""
    for attempt in range(attempts):
        try:
            return call()
        except kube.ApiException as exc:
            if exc.status not in (429, 500, 503) or attempt == attempts - 1:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def create_gadgets(api: Any, ns: str, count: int, prefix: str, **spec: Any) -> dict[str, str]:
    """Create `count` Gadgets; name → uid."""
    uids = {}
    for i in range(count):
        name = f"{prefix}-{i}"
        obj = with_retries(lambda n=name: kube.create_object(api, GADGET, gadget(ns, n, **spec)))
        uids[name] = obj["metadata"]["uid"]
    return uids


def all_recorded(uids: dict[str, str], phase: str) -> bool:
    """Every one of the objects has reached `phase` in the database."""
    return Resource.objects.filter(uid__in=uids.values(), phase=phase).count() == len(uids)


def phases(uid: str) -> list[tuple[str, str]]:
    """The recorded transitions of one object, in order."""
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))
