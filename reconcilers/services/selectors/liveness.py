"""The engine's liveness as the console's overview shows it: the controller's leader Lease and the Celery workers
answering a ping, each memoised (`read_memo`) and refreshed in the background, and reported, never raised, when
the API or the broker does not answer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings

from reconcilers.core.meta import parse_rfc3339
from reconcilers.engine import apiclient, kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME
from reconcilers.services.selectors.read_memo import cached


def controller_leader(*, ttl: float = 5.0) -> dict[str, Any]:
    """The controller's leader Lease: {"holder", "renewed", "expires", "alive", "error"} (memoised `ttl` s,
    then refreshed in the background while the last value is answered)."""

    def read() -> dict[str, Any]:
        namespace = getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default")
        try:
            lease = kube.get_object(apiclient.get_api_client(), LEASE, namespace, LEASE_NAME, timeout=(1.0, 2.0))
        except Exception as exc:  # a read for display: report, never fail the page
            return {"holder": "", "renewed": None, "expires": None, "alive": False,
                    "error": f"the Kubernetes API did not answer: {type(exc).__name__}"}
        if lease is None:
            return {"holder": "", "renewed": None, "expires": None, "alive": False,
                    "error": "no controller has led yet"}
        spec = lease.get("spec") or {}
        renewed_raw = spec.get("renewTime") or spec.get("acquireTime")
        renewed = parse_rfc3339(renewed_raw)
        expires = renewed + timedelta(seconds=float(spec.get("leaseDurationSeconds") or 15)) if renewed else None
        alive = bool(spec.get("holderIdentity")) and expires is not None and expires > datetime.now(UTC)
        return {"holder": spec.get("holderIdentity") or "", "renewed": renewed, "expires": expires,
                "alive": alive, "error": ""}

    return cached("leader", ttl, read, background=True)


def workers_alive(*, ttl: float = 10.0, timeout: float = 0.3) -> dict[str, Any]:
    """The Celery workers that answer a broadcast ping: {"workers": [names], "error"} (memoised `ttl` s, then
    refreshed in the background while the last value is answered: the ping waits its whole `timeout`)."""

    def read() -> dict[str, Any]:
        try:
            replies = current_app.control.ping(timeout=timeout) or []
        except Exception as exc:  # the broker did not answer
            return {"workers": [], "error": f"the broker did not answer: {type(exc).__name__}"}
        return {"workers": sorted(name for reply in replies for name in reply), "error": ""}

    return cached("workers", ttl, read, background=True)
