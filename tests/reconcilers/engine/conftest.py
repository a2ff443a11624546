"""Fixtures the engine's integration tests share: a Gadget created in kubesim under the Gadget reconciler."""

from __future__ import annotations

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
