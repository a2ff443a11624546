"""Readiness: can this web process serve? The database answers, Redis answers, the Kubernetes API answers
(required: `ready` is false, /readyz 503, without any of them), and a controller leads (the
`opsconsole-controller` Lease has a holder whose lease has not expired).

The controller is reported, not required: without a leader the web still serves the console and the API
(the history, the queue, manual reconciles run by the workers), and a readiness probe that failed with it
would take every web pod out of its Service exactly when an operator needs the console to see why. Its
absence makes the answer `degraded` (200), and the OpsconsoleNoLeader alert covers it.

Many clusters: each registered, non-removed cluster has a check `cluster:<name>` (never required) saying whether
its controller's heartbeat is fresh (`cluster_health.cluster_state`: reported within STALE_REPORTS report
intervals and not unreachable), with its leader and the report's age. A cluster that is unreachable, or another
cluster whose controller has never reported, makes the answer `degraded`, never unready: the web serves every
cluster, and taking it out of its Service because one cluster is away would hide the others (and the console's
"unknown since" for that one). The default cluster's controller is the Lease check's; before its first report
it is `ok` (an install whose controller predates the reports)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import connection

from reconcilers.core.meta import parse_rfc3339
from reconcilers.engine import apiclient, kube
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME
from reconcilers.models import Cluster
from reconcilers.services.selectors import cluster_health


def _timeout() -> float:
    return float(getattr(settings, "OPSCONSOLE_READYZ_TIMEOUT_SECONDS", 2.0))


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def _check_redis() -> str:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=_timeout(), socket_connect_timeout=_timeout())
    try:
        client.ping()
    finally:
        client.close()
    return "pong"


def _check_kubernetes() -> str:
    version = kube.server_version(apiclient.get_api_client(), timeout=_timeout())
    return str(version.get("gitVersion") or "answered")


def _check_leader() -> str:
    namespace = getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default")
    lease = kube.get_object(apiclient.get_api_client(), LEASE, namespace, LEASE_NAME, timeout=(_timeout(), _timeout()))
    if lease is None:
        raise RuntimeError(f"no Lease {namespace}/{LEASE_NAME}: no controller has led yet")
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if not holder:
        raise RuntimeError("the Lease has no holder")
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed:
        raise RuntimeError("the Lease was never renewed")
    renewed_at = parse_rfc3339(renewed)
    if renewed_at is None:
        raise RuntimeError(f"the Lease's renew time {renewed!r} is not an RFC 3339 time")
    expires = renewed_at + timedelta(seconds=float(spec.get("leaseDurationSeconds") or 15))
    if expires < datetime.now(UTC):
        raise RuntimeError(f"the Lease of {holder} expired at {expires.isoformat()}")
    return holder


class ClusterNotFresh(RuntimeError):
    """A cluster's controller heartbeat is not fresh."""


def _cluster_check(cluster: Cluster, now: datetime) -> Callable[[], str]:
    """The check of one registered cluster: its controller's heartbeat is fresh (ClusterNotFresh naming why not)."""

    def check() -> str:
        state, since = cluster_health.cluster_state(cluster, now)
        if state == cluster_health.UNREACHABLE:
            raise ClusterNotFresh(f"unreachable since {since.isoformat() if since else '?'}"
                                  f"{' (its API server lost)' if cluster.unreachable_since else ''}")
        if state == cluster_health.UNREPORTED:
            if cluster.is_default:
                return "no report yet (its controller: the Lease check)"
            raise ClusterNotFresh("its controller has not reported yet")
        age = (now - cluster.heartbeat_at).total_seconds()
        return f"heartbeat {age:.0f}s ago, leader {cluster.leader or '?'}"

    return check


def cluster_checks(now: datetime | None = None) -> dict[str, Callable[[], str]]:
    """`cluster:<name>` checks of the registered, non-removed clusters (a database that does not answer: none;
    the database check says so)."""
    now = now or datetime.now(UTC)
    try:
        rows = list(Cluster.objects.filter(removed_at__isnull=True).order_by("name"))
    except Exception:  # noqa: BLE001 - the database check reports it
        return {}
    return {f"cluster:{c.name}": _cluster_check(c, now) for c in rows}


CHECKS: dict[str, Callable[[], str]] = {
    "database": _check_database,
    "redis": _check_redis,
    "kubernetes": _check_kubernetes,
    "controller": _check_leader,
}
#: the checks whose failure makes the process unready; a failure of any other only makes it degraded
REQUIRED = frozenset({"database", "redis", "kubernetes"})


def readiness_check() -> dict[str, Any]:
    """Every check's outcome: {"ready": every required check ok, "degraded": another check failed,
    "checks": {name: {"ok", "required", "detail", "ms"}}}."""
    checks: dict[str, dict[str, Any]] = {}
    for name, check in {**CHECKS, **cluster_checks()}.items():
        started = time.monotonic()
        try:
            detail, ok = check(), True
        except Exception as exc:  # a probe reports, it never raises
            detail, ok = f"{type(exc).__name__}: {exc}"[:500], False
        checks[name] = {"ok": ok, "required": name in REQUIRED, "detail": detail,
                        "ms": round((time.monotonic() - started) * 1000, 1)}
    return {"ready": all(c["ok"] for c in checks.values() if c["required"]),
            "degraded": not all(c["ok"] for c in checks.values() if not c["required"]), "checks": checks}
