"""The sandbox cluster of a test session: kubesim in a thread of the test process, the kinds' CRDs, namespaces.

kubesim runs in thread mode (no subprocess to start: well under a second) with short simulated pod delays, so a
Deployment's pods are Ready about 0.1-0.3 s after it is applied. It listens on a 127.0.0.1 TCP port, so the
engine's subprocesses (`opsconsole_engine`) reach it through its kubeconfig as the test process does. CRDs are
generated from the kinds (`reconcilers.core.crd.crd_manifest`), applied server-side, and waited for until the
API serves them. No Django here.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kubesim.testing import KubesimHandle, running_kubesim
from reconcilers.core.crd import crd_manifest
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.engine import kube

#: simulated pod lifecycle: Pending → bound → Running → Ready in about 0.1 s (a Deployment in 0.1-0.3 s); a
#: broken image's pull is retried after 1 s, doubling to 30 s (the real kubelet: 10 s to 300 s): a broken Pod
#: left over by an earlier test soon goes quiet
POD_DELAYS: dict[str, float] = {"schedule_delay": 0.02, "start_delay": 0.04, "ready_delay": 0.04,
                                "terminate_delay": 0.02, "image_pull_backoff": 1.0, "image_pull_backoff_max": 30.0}
CRD = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
FIELD_MANAGER = "opsconsole-testing"
#: seconds each session-wide piece took to start in this process ("kubesim_cluster", "kind_crds")
TIMINGS: dict[str, float] = {}


@contextmanager
def kubesim_running(**options: Any) -> Iterator[KubesimHandle]:
    """kubesim in thread mode with `POD_DELAYS` (overridable by `options`), its start time in
    `TIMINGS["kubesim_cluster"]`; its INFO logs are kept quiet."""
    logging.getLogger("kubesim").setLevel(logging.WARNING)
    started = time.perf_counter()
    with running_kubesim(mode="thread", **{**POD_DELAYS, **options}) as handle:
        TIMINGS["kubesim_cluster"] = time.perf_counter() - started
        yield handle


class CrdInstaller:
    """Applies kinds' CRDs to one cluster, each once per session, and waits until the API serves them."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.installed: dict[type[Reconciler], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def ensure(self, kinds: Sequence[type[Reconciler]], timeout: float = 30.0) -> list[dict[str, Any]]:
        """The CRD of each kind, applied (server-side, forced) and served; the manifests, in order."""
        with self._lock:
            fresh = {cls: crd_manifest(cls) for cls in kinds if cls not in self.installed}
            for crd in fresh.values():
                kube.apply_object(self.api, CRD, None, crd["metadata"]["name"], crd, field_manager=FIELD_MANAGER)
            deadline = time.monotonic() + timeout
            pending = dict(fresh)
            while pending:
                pending = {cls: crd for cls, crd in pending.items() if not kube.crd_served(self.api, crd)}
                if not pending:
                    break
                if time.monotonic() >= deadline:
                    names = ", ".join(sorted(crd["metadata"]["name"] for crd in pending.values()))
                    raise TimeoutError(f"CRDs not served after {timeout:g} s: {names}")
                time.sleep(0.02)
            self.installed.update(fresh)
            return [self.installed[cls] for cls in kinds]


def create_namespace(api: Any, prefix: str = "t") -> str:
    """A new namespace `<prefix>-<8 hex>` in the cluster; its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kube.create_object(api, NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def delete_namespace(api: Any, name: str) -> None:
    """Delete a namespace (in the background; best effort)."""
    try:
        kube.delete_object(api, NAMESPACE, None, name)
    except Exception as exc:  # noqa: BLE001 - a tidy-up must not fail the test
        logging.getLogger(__name__).debug("deleting namespace %s: %s", name, exc)


def resource_of(kind: type[Reconciler] | ResourceKind) -> ResourceKind:
    """The ResourceKind of a Reconciler class (or the ResourceKind itself)."""
    return kind if isinstance(kind, ResourceKind) else kind.resource
