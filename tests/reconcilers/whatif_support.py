"""What the what-if tests share: a Memcached rolled out in kubesim by the real step, and its resourceVersions."""

from __future__ import annotations

import time

from reconcilers.engine import kube, step
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED, RUNNING, SERVICE, MemcachedReconciler


def running_memcached(kapi, namespace, name="mc", size=1):
    """A Memcached created and stepped until Running (its Deployment rolled out); the object as it is."""
    rec = MemcachedReconciler()
    kube.create_object(kapi, MEMCACHED, {"apiVersion": MEMCACHED.api_version, "kind": "Memcached",
                                         "metadata": {"name": name, "namespace": namespace},
                                         "spec": {"size": size, "image": "memcached:1.6"}})
    recorded, deadline = None, time.monotonic() + 20
    while time.monotonic() < deadline:
        obj = kube.get_object(kapi, MEMCACHED, namespace, name)
        outcome = step.reconcile_step(rec, kapi, obj, recorded)
        recorded = outcome.change.to_phase if outcome.change else recorded
        if recorded == RUNNING:
            return rec, kube.get_object(kapi, MEMCACHED, namespace, name), recorded
        time.sleep(0.1)
    raise AssertionError(f"the Memcached did not roll out (phase {recorded})")


def versions(kapi, namespace, name="mc"):
    return [(kube.get_object(kapi, kind, namespace, name) or {})["metadata"]["resourceVersion"]
            for kind in (MEMCACHED, DEPLOYMENT, SERVICE)]
