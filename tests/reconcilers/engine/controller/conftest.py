"""Fixtures of the controller tests: a real kubesim (one for this directory, stopped after its last test), an
ApiClient on it, the Widget CRD, and a fresh namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kubesim.testing import running_kubesim as kubesim_server
from reconcilers.engine import kube
from reconcilers.engine.controller.bootstrap import CRD, wait_for_crds
from tests.reconcilers.engine.controller.kinds import NAMESPACE, WIDGET, crd

BOOKMARK_INTERVAL = 0.3


@pytest.fixture(scope="package")
def running_kubesim() -> Iterator:
    """kubesim in a thread of this process, sending watch bookmarks often."""
    with kubesim_server(bookmark_interval=BOOKMARK_INTERVAL) as handle:
        yield handle


@pytest.fixture(scope="package")
def api(running_kubesim):
    """An ApiClient built the way the engine builds it, from kubesim's kubeconfig."""
    client = kube.build_api_client(running_kubesim.kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="package")
def widget_kind(api):
    """The Widget CRD, served."""
    definition = crd(WIDGET)
    kube.ensure_object(api, CRD, definition)
    wait_for_crds(api, [definition], timeout=10)
    return WIDGET


@pytest.fixture
def ns(api) -> str:
    """A namespace of this test's own."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create_object(api, NAMESPACE, {"metadata": {"name": name}})
    return name


@pytest.fixture
def kubesim_faults(running_kubesim) -> Iterator:
    """The session kubesim, with every fault cleared after the test."""
    try:
        yield running_kubesim
    finally:
        running_kubesim.clear_faults()
