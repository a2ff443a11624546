"""What the controller-shard tests share: shard controller processes on an engine, the shard Leases read back
(who is live, the view each acts on, how many keys each holds, how many objects its informers hold), who holds the
controller's Lease, and the Gadgets they reconcile with their shard labels."""

from __future__ import annotations

import time
from typing import Any

from kubesim.testing import wait_for
from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME
from reconcilers.engine.shards.labels import CACHED, OWNER
from reconcilers.engine.shards.membership import SHARD_LEASE_PREFIX
from reconcilers.engine.shards.ownership import KEYS, VIEW
from reconcilers.models import ReconcileRun
from tests.fixtures.engines import ControllerProcess, Engine

#: the test controllers' --lease-duration (tests/fixtures/harness.py)
LEASE_DURATION = 4.0


def start_shard(engine: Engine, shard: str, queue: str | None = None, **env: str) -> ControllerProcess:
    """A `runcontroller` of shard `shard` on the engine's kubesim and database (`queue`: another Celery queue)."""
    proc = ControllerProcess(queue or engine.queue_name, {**engine.env, "OPSCONSOLE_SHARD": shard, **env})
    proc.log_path = proc.log_path.with_name(f"controller-{proc.queue}-{shard}-{time.monotonic_ns()}.log")
    return proc.start()


def shard_leases(kapi: Any) -> dict[str, dict[str, Any]]:
    """Every shard Lease by shard id: holder, annotations."""
    out = {}
    for lease in kube.list_objects(kapi, LEASE, "default").items:
        name = lease["metadata"]["name"]
        if name.startswith(SHARD_LEASE_PREFIX):
            out[name[len(SHARD_LEASE_PREFIX):]] = {
                "holder": (lease.get("spec") or {}).get("holderIdentity") or "",
                "annotations": lease["metadata"].get("annotations") or {}}
    return out


def agreed(kapi: Any, shards: set[str], total: int | None = None, stale: str | None = None) -> bool:
    """Whether `shards` hold their Leases with one view between them, not `stale` (a dead shard's Lease keeps
    naming its holder: it is not asked about), and, given `total`, hold that many keys between them."""
    leases = shard_leases(kapi)
    if not all(leases.get(s, {}).get("holder") for s in shards):
        return False
    views = {leases[s]["annotations"].get(VIEW) for s in shards}
    if len(views) != 1 or None in views or stale in views:
        return False
    return total is None or sum(keys(kapi, shards).values()) == total


def view(kapi: Any, shard: str) -> str:
    """The view token shard `shard`'s Lease shows."""
    return shard_leases(kapi)[shard]["annotations"].get(VIEW) or ""


def keys(kapi: Any, shards: set[str] | None = None) -> dict[str, int]:
    """How many keys each held shard Lease (of `shards`, None: all) says its shard acts on."""
    return {s: int(lease["annotations"].get(KEYS) or 0) for s, lease in shard_leases(kapi).items()
            if lease["holder"] and (shards is None or s in shards)}


def wait_agreed(kapi: Any, shards: set[str], total: int | None = None, timeout: float = 60.0,
                stale: str | None = None) -> float:
    """Until `agreed`; the seconds it took."""
    started = time.monotonic()
    wait_for(lambda: agreed(kapi, shards, total, stale), timeout=timeout, interval=0.05)
    return time.monotonic() - started


def run_shards(key: str) -> list[list[str]]:
    """For each run of `key`, the shards its triggers name."""
    return [[t.get("shard", "") for t in (run.triggers or [])]
            for run in ReconcileRun.objects.filter(key=key).order_by("id")]


def gadget_key(namespace: str, name: str) -> str:
    return f"test.opsconsole.io/v1/gadgets/{namespace}/{name}"


def cached(kapi: Any, shards: set[str]) -> dict[str, int]:
    """How many reconciled objects each held shard Lease (of `shards`) says its informers hold (labels mode)."""
    return {s: int(lease["annotations"].get(CACHED) or 0) for s, lease in shard_leases(kapi).items()
            if lease["holder"] and s in shards}


def owners(kapi: Any, kind: Any, namespace: str) -> dict[str, str]:
    """Each object's `shard.opsconsole.io/owner` label ('' none) by name (labels mode)."""
    return {o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(OWNER, "")
            for o in kube.list_objects(kapi, kind, namespace).items}


def cluster_shard(kapi: Any) -> str:
    """The shard whose replica holds the controller's Lease (the cluster-wide work, and with labels the sharder)."""
    lease = kube.get_object(kapi, LEASE, "default", LEASE_NAME) or {}
    holder = (lease.get("spec") or {}).get("holderIdentity") or ""
    return next((s for s, lease in shard_leases(kapi).items() if holder and lease["holder"] == holder), "")
