"""The controller shards as their Leases tell (reconcilers.engine.shards): for the console's engine strip.

Each shard's Lease `opsconsole-shard-<id>` names its holder and when it renewed, and carries the shard's key count,
the token of the view it acts on and, for a canary, its selector. A shard is live while its renewal is within its
lease duration (as the leader's Lease is judged for display); it is handing over while it acts on a view other than
the one most live shards act on (some of its keys wait for a previous owner to stop, or it has not yet seen a
shard join or leave). Memoised like the leader's Lease; never fails the page.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings

from reconcilers.core.meta import parse_rfc3339
from reconcilers.engine import apiclient, kube
from reconcilers.engine.controller.leader import LEASE
from reconcilers.engine.shards.membership import SHARD_LEASE_PREFIX
from reconcilers.engine.shards.ownership import KEYS, PENDING, SELECTOR, VIEW
from reconcilers.services.selectors.read_memo import cached


def shard_rows(leases: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """One row per shard Lease, by shard id: {shard, holder, renewed, alive, keys, pending (keys waiting for their
    previous owner: the handover's lag), selector, view, agreed}."""
    rows = []
    for lease in leases:
        name = str(lease["metadata"].get("name") or "")
        if not name.startswith(SHARD_LEASE_PREFIX):
            continue
        spec, notes = lease.get("spec") or {}, lease["metadata"].get("annotations") or {}
        renewed = parse_rfc3339(spec.get("renewTime") or spec.get("acquireTime"))
        expires = renewed + timedelta(seconds=float(spec.get("leaseDurationSeconds") or 15)) if renewed else None
        keys, pending = notes.get(KEYS), notes.get(PENDING)
        rows.append({"shard": name[len(SHARD_LEASE_PREFIX):], "holder": spec.get("holderIdentity") or "",
                     "renewed": renewed, "keys": int(keys) if str(keys or "").isdigit() else None,
                     "pending": int(pending) if str(pending or "").isdigit() else 0,
                     "alive": bool(spec.get("holderIdentity")) and expires is not None and expires > now,
                     "selector": notes.get(SELECTOR) or "", "view": notes.get(VIEW) or ""})
    common = Counter(r["view"] for r in rows if r["alive"] and r["view"]).most_common(1)
    for row in rows:
        row["agreed"] = not row["alive"] or (bool(common) and row["view"] == common[0][0])
    return sorted(rows, key=lambda r: r["shard"])


def controller_shards(*, ttl: float = 5.0) -> dict[str, Any]:
    """{"shards": shard_rows(...), "error"}; no shard Lease: an empty list (the controller is not sharded)."""

    def read() -> dict[str, Any]:
        namespace = getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default")
        try:
            leases = kube.list_objects(apiclient.get_api_client(), LEASE, namespace, timeout=(1.0, 2.0)).items
        except Exception as exc:  # a read for display: report, never fail the page
            return {"shards": [], "error": f"the Kubernetes API did not answer: {type(exc).__name__}"}
        return {"shards": shard_rows(leases, datetime.now(UTC)), "error": ""}

    return cached("shards", ttl, read, background=True)
