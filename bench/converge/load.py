"""The load side of the benchmark: the CRD, the Memcached CRs it creates (in a burst or at a fixed rate), a
watch that notes when each CR first reports `Running`, the reconcile start times of each operator, and the
statistics.

The bench talks to kubesim through `reconcilers.engine.kube` with its own ApiClient (that module reads no
Django setting when it is handed a kubeconfig). Times are wall-clock (`time.time()`), the same clock the
operators' processes use on this machine.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.kinds.memcached import MEMCACHED

from .procs import ROOT

CRD = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                   namespaced=False)
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)


def install(api: Any, namespaces: Iterable[str], timeout: float = 30.0) -> None:
    """Apply deploy/crds/memcached.yaml, wait until Memcacheds are served, create the namespaces."""
    crd = yaml.safe_load((ROOT / "deploy" / "crds" / "memcached.yaml").read_text())
    kube.ensure_object(api, CRD, crd)
    for ns in namespaces:
        kube.ensure_object(api, NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    deadline = time.monotonic() + timeout
    while True:
        try:
            kube.list_objects(api, MEMCACHED, None)
            return
        except kube.ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def memcached(namespace: str, name: str, size: int) -> dict[str, Any]:
    """One Memcached CR."""
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": size}}


def key_of(namespace: str, name: str, cluster: str = DEFAULT_CLUSTER) -> str:
    """The reconcile key of a Memcached (the engine's `group/version/plural/namespace/name`, with the cluster in
    front outside the default cluster)."""
    return key_join(cluster, MEMCACHED.request(namespace, name).key())


class Tracker(threading.Thread):
    """Lists then watches every Memcached and notes the time each first reports `status.phase: Running` (keyed as
    the engine keys them in `cluster`)."""

    def __init__(self, api: Any, cluster: str = DEFAULT_CLUSTER) -> None:
        super().__init__(name=f"tracker {cluster}", daemon=True)
        self.api = api
        self.cluster = cluster
        self.cond = threading.Condition()
        self.running_at: dict[str, float] = {}  # key -> when first seen Running
        self.phase: dict[str, str] = {}
        self.synced = threading.Event()
        self._stop_event = threading.Event()
        self._stream: Any = None
        self.error: BaseException | None = None

    def _see(self, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        key = key_of(meta.get("namespace") or "", meta.get("name") or "", self.cluster)
        phase = (obj.get("status") or {}).get("phase") or ""
        with self.cond:
            self.phase[key] = phase
            if phase == "Running" and key not in self.running_at:
                self.running_at[key] = now
                self.cond.notify_all()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                listed = kube.list_objects(self.api, MEMCACHED, None)
                now = time.time()
                for obj in listed.items:
                    self._see(obj, now)
                self.synced.set()
                rv = listed.resource_version
                while not self._stop_event.is_set():
                    self._stream = kube.watch_objects(self.api, MEMCACHED, resource_version=rv, timeout_seconds=600)
                    for event in self._stream:
                        if event.type == "BOOKMARK":
                            rv = event.resource_version or rv
                            continue
                        self._see(event.object, time.time())
                        rv = event.resource_version or rv
            except kube.ResourceExpired:
                continue
            except Exception as exc:  # noqa: BLE001 - re-list after a pause; reported if it persists
                if self._stop_event.is_set():
                    return
                self.error = exc
                time.sleep(0.2)

    def wait_running(self, keys: Iterable[str], timeout: float) -> bool:
        """Block until every key was seen Running; False on timeout."""
        keys = list(keys)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if all(k in self.running_at for k in keys):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))

    def count_running(self, keys: Iterable[str]) -> int:
        with self.cond:
            return sum(1 for k in keys if k in self.running_at)

    def stop(self) -> None:
        self._stop_event.set()
        if self._stream is not None:
            self._stream.close()


def create_burst(api: Any, namespace: str, names: list[str], size: int, threads: int = 4,
                 cluster: str = DEFAULT_CLUSTER) -> dict[str, float]:
    """Create the CRs as fast as `threads` client threads can; key (in `cluster`) -> when its create returned."""
    created: dict[str, float] = {}
    lock = threading.Lock()

    def one(name: str) -> None:
        kube.create_object(api, MEMCACHED, memcached(namespace, name, size))
        now = time.time()
        with lock:
            created[key_of(namespace, name, cluster)] = now

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="create") as pool:
        list(pool.map(one, names))
    return created


def create_at_rate(api: Any, namespace: str, names: list[str], size: int, rate: float) -> dict[str, float]:
    """Create one CR every 1/rate seconds (on a fixed schedule); key -> when its create returned."""
    created: dict[str, float] = {}
    t0 = time.monotonic()
    for i, name in enumerate(names):
        wait = t0 + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        kube.create_object(api, MEMCACHED, memcached(namespace, name, size))
        created[key_of(namespace, name)] = time.time()
    return created


# -- the operators' reconcile runs ---------------------------------------------------------------------------


def runs_from_database(database_url: str) -> list[tuple[str, float, float, str]]:
    """(key, start unix time, duration s, result) of every ReconcileRun opsconsole recorded."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT key, started_at, duration_seconds, result FROM reconcilers_reconcilerun").fetchall()
    return [(k, s.timestamp() if isinstance(s, datetime) else float(s), float(d), r) for k, s, d, r in rows]


def runs_from_kopf_log(path: Path) -> list[tuple[str, float, float, str]]:
    """(key, start unix time, duration s, result) of every reconcile the kopf operator logged."""
    out = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4:
            out.append((parts[3], float(parts[0]), float(parts[1]), parts[2]))
    return out


def first_starts(runs: Iterable[tuple[str, float, float, str]]) -> dict[str, float]:
    """key -> the start of its first reconcile."""
    first: dict[str, float] = {}
    for key, start, _d, _r in runs:
        if key not in first or start < first[key]:
            first[key] = start
    return first


# -- statistics ----------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def latencies(created: dict[str, float], later: dict[str, float]) -> list[float]:
    """Seconds from each key's create to its `later` time (keys without one are left out)."""
    return [later[k] - t for k, t in created.items() if k in later]
