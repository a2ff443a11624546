"""The fleet bench/memory measures: N Memcacheds of size 1 in kubesim, each created as `kubectl apply` creates it
(with kubectl's last-applied annotation) and converged by opsconsole's own reconcile step (`reconcile_step` and
`complete`, what the runner calls: its Deployment and Service applied, its status written, an Event per phase
change), with the live phase standing for the record, as bench/converge's kopf side does. kubesim's controllers make
each Deployment's ReplicaSet and Pod, and their Events. No database, queue or worker is involved.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconcilers.core.crd import crd_manifest
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, step
from reconcilers.engine.controller.bootstrap import CRD, wait_for_crds
from reconcilers.engine.controller.slim import LAST_APPLIED
from reconcilers.kinds.memcached import MEMCACHED, RUNNING, MemcachedReconciler

NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", False)
RECONCILER = MemcachedReconciler()
#: reconciles one Memcached may take to reach Running (Pending first, Running once its Pod is ready)
MAX_RUNS = 40


def manifest(name: str, namespace: str) -> dict[str, Any]:
    """A Memcached as `kubectl apply` sends it: the applied manifest in the last-applied annotation."""
    obj: dict[str, Any] = {"apiVersion": MEMCACHED.api_version, "kind": MEMCACHED.kind,
                           "metadata": {"name": name, "namespace": namespace}, "spec": {"size": 1}}
    applied = json.dumps(obj, separators=(",", ":"))
    obj["metadata"]["annotations"] = {LAST_APPLIED: applied}
    return obj


def converge(api: Any, namespace: str, name: str) -> str:
    """Create one Memcached and reconcile it until Running; its phase at the end."""
    obj = kube.create_object(api, MEMCACHED, manifest(name, namespace), namespace,
                             field_manager="kubectl-client-side-apply")
    phase = ""
    for _ in range(MAX_RUNS):
        recorded = (obj.get("status") or {}).get("phase") or None
        outcome = step.complete(step.reconcile_step(RECONCILER, api, obj, recorded))
        phase = outcome.phase
        if phase == RUNNING:
            return phase
        time.sleep(0.2 if outcome.queue is not step.QueueAction.REQUEUE_NOW else 0.0)
        obj = kube.get_object(api, MEMCACHED, namespace, name) or obj
    return phase


def build(api: Any, n: int, namespace: str, *, threads: int = 8, log: Any = print) -> float:
    """The Memcached CRD and `n` converged Memcacheds in `namespace`; seconds it took. Raises when any is not
    Running."""
    started = time.monotonic()
    definition = crd_manifest(MemcachedReconciler)
    kube.ensure_object(api, CRD, definition)
    wait_for_crds(api, [definition], timeout=30)
    kube.ensure_object(api, NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    names = [f"mc-{i:05d}" for i in range(n)]
    done = 0
    with ThreadPoolExecutor(threads) as pool:
        for name, phase in zip(names, pool.map(lambda nm: converge(api, namespace, nm), names), strict=True):
            if phase != RUNNING:
                raise RuntimeError(f"Memcached {namespace}/{name} ended {phase or 'without a phase'}, not Running")
            done += 1
            if done % 500 == 0:
                log(f"  {done}/{n} Running ({time.monotonic() - started:.0f} s)")
    return time.monotonic() - started
