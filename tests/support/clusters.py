"""What the tests of several clusters share: a controller process of a named cluster, and polling until a check
holds (tests/reconcilers/test_integration_clusters.py, tests/faults/test_cluster_faults.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.fixtures.engines import ControllerProcess
from tests.support.workers import GroupProcess


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
