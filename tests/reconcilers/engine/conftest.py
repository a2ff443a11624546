"""Fixtures the engine's integration tests share: a Gadget created in kubesim under the Gadget reconciler, and a
private workqueue."""

from __future__ import annotations

import uuid

import pytest

from reconcilers.engine import kube
from tests.reconcilers.testkinds import GADGET, gadget

GADGETS = ["tests.reconcilers.testkinds.GadgetReconciler"]


@pytest.fixture
def make(kapi, namespace, workqueue, reconcilers):
    """Create a Gadget under the Gadget reconciler; returns (key, object). A module's own `make` overrides it."""
    reconcilers(GADGETS)

    def create(name="g", **spec):
        obj = kube.create_object(kapi, GADGET, gadget(namespace, name, **spec))
        return GADGET.request(namespace, name).key(), obj

    return create


@pytest.fixture
def queue(redis_client):
    """A private workqueue in the suite's Redis (its object cache included), empty before and after the test."""
    from reconcilers.engine.workqueue import WorkQueue

    q = WorkQueue(redis_client, name=f"test-cache-{uuid.uuid4().hex[:8]}", lease_seconds=5.0)
    q.clear()
    yield q
    q.clear()
