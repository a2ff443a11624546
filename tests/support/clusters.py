"""What the tests of several clusters share: the default cluster and a cluster b set up for a test, a controller
process of a named cluster, and polling until a check holds (tests/reconcilers/test_integration_clusters.py,
tests/faults/test_cluster_faults.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reconcilers.engine import apiclient, kube
from reconcilers.engine.kubeconfig import kubeconfig_with_context
from tests.fixtures.cluster import NAMESPACE
from tests.fixtures.engines import ControllerProcess
from tests.support.workers import GroupProcess


@contextmanager
def default_and_b(settings: Any, kubeconfig_a: str, kubeconfig_b: str, directory: Path,
                  health_seconds: float) -> Iterator[tuple[dict[str, str], Any, Any, str]]:
    """The default cluster (`kubeconfig_a`) and cluster b (`kubeconfig_b`, as the context `b` of a merged
    KUBECONFIG list) for a test: the settings pointed at the list; (the engine's environment: that list and the
    health interval, the test's client of each cluster, a namespace made in both). The clients are closed and the
    process's API clients forgotten after."""
    kubeconfig_with_context(kubeconfig_b, "b", directory / "b.yaml")
    merged = f"{kubeconfig_a}:{directory / 'b.yaml'}"
    settings.KUBECONFIG = merged
    apiclient.reset()
    api_a, api_b = kube.build_api_client(kubeconfig_a), kube.build_api_client(kubeconfig_b)
    try:
        namespace = f"t-{uuid.uuid4().hex[:8]}"
        for api in (api_a, api_b):
            kube.create_object(api, NAMESPACE, {"metadata": {"name": namespace}})
        yield {"KUBECONFIG": merged, "OPSCONSOLE_CLUSTER_HEALTH_SECONDS": str(health_seconds)}, api_a, api_b, namespace
    finally:
        for api in (api_a, api_b):
            api.close()
        apiclient.reset()


class ClusterController(ControllerProcess):
    """`runcontroller --cluster NAME --context NAME` (through its environment), logging to a file of its own."""

    def __init__(self, queue: str, extra_env: dict[str, str], cluster: str) -> None:
        GroupProcess.__init__(self, f"controller-{queue}-{cluster}.log")
        self.queue = queue
        self.extra_env = {**extra_env, "OPSCONSOLE_CLUSTER": cluster, "OPSCONSOLE_CLUSTER_CONTEXT": cluster}


def until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """The first true value `check()` returns, polled every 0.1 s; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")
