"""The audit chain's verification status for the console: verifying every chain reads every transition, so
the last full result is kept (with when it ran and how long it took) and re-run only when asked; one
resource's chain is cheap and is verified on demand. What a caller limited to namespaces sees of a verification
is its own namespaces' part (`ChainStatus.visible_to`); asking for a full verification is throttled per
user (`audit_verify_wait`). A full verification checks what `manage.py audit_verify` checks: every chain, the
action record's chain, the reconcile requests' identities and the newest signed checkpoint."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime

import redis
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine.audit import chain_verify, record_verify
from reconcilers.engine.checkpoint import checkpoint_verify
from reconcilers.models import Transition
from reconcilers.services.selectors.scope import scope_allows

#: shown breaks per status
SHOWN_BREAKS = 10
#: breaks kept (with their namespace) so that a limited caller still sees its own first ones
KEPT_BREAKS = 1000
#: Redis key prefix of the per-user verification slots (each expires after the interval)
VERIFY_SLOT_PREFIX = "opsconsole-audit-verify:"
#: the "namespace" of problems of the whole record (not one resource's): shown only to callers limited to none
RECORD_WIDE = "\x00record"


@dataclass(frozen=True)
class ChainStatus:
    """One verification: intact or the first breaks, how many chains and rows, when and how long it took."""

    ok: bool
    chains: int
    transitions: int
    breaks: list[str]
    checked_at: datetime
    seconds: float
    #: every kept break as (cluster, namespace, description), and {(cluster, namespace): (chains, transitions)} at
    #: verification
    found: tuple[tuple[str, str, str], ...] = ()
    per_namespace: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def visible_to(self, namespaces: frozenset[str] | None) -> ChainStatus:
        """This status as a caller limited to `namespaces` (a Scope: by cluster too) may see it (None: everything):
        only the breaks of resources in its namespaces ('' is the cluster scope, as everywhere), chains and
        transitions counted over its namespaces, intact when none of its chains is broken. Nothing of another
        namespace or cluster, not even whether it has a break."""
        if namespaces is None:
            return self
        mine = [text for cluster, ns, text in self.found
                if ns != RECORD_WIDE and scope_allows(namespaces, cluster, ns)]
        counts = [n for (cluster, ns), n in self.per_namespace.items() if scope_allows(namespaces, cluster, ns)]
        return replace(self, ok=not mine, breaks=mine[:SHOWN_BREAKS], chains=sum(c for c, _ in counts),
                       transitions=sum(t for _, t in counts), found=(), per_namespace={})


def _record_problems() -> list:
    """What `manage.py audit_verify` checks besides the chains: the action record's chain, the reconcile
    requests' identities and the database against the newest signed checkpoint."""
    problems = list(record_verify())
    problems += checkpoint_verify().problems or []
    return problems


_lock = threading.Lock()
_last: ChainStatus | None = None


def _per_namespace() -> dict[tuple[str, str], tuple[int, int]]:
    rows = (Transition.objects.values("cluster", "namespace")
            .annotate(chains=Count("resource_uid", distinct=True), n=Count("id")).order_by())
    return {(row["cluster"], row["namespace"]): (row["chains"], row["n"]) for row in rows}


def audit_chain_status(
    *, refresh: bool = False, resource_uid: str | None = None, namespaces: frozenset[str] | None = None
) -> ChainStatus | None:
    """The last full verification (None when none ran in this process), or a fresh one with `refresh`; with
    `resource_uid`, that resource's chain verified now. As a caller limited to `namespaces` may see it."""
    global _last
    if resource_uid is None and not refresh:
        return _last.visible_to(namespaces) if _last is not None else None
    started = time.monotonic()
    report = chain_verify(resource_uid)
    found = tuple((b.cluster or DEFAULT_CLUSTER, b.namespace, b.describe()) for b in report.breaks[:KEPT_BREAKS])
    if resource_uid is None:  # the whole record: also the action chain, request identities, the newest checkpoint
        found += tuple((RECORD_WIDE, RECORD_WIDE, p.describe()) for p in _record_problems()[:KEPT_BREAKS])
    status = ChainStatus(not found, report.chains, report.transitions,
                         [text for _c, _ns, text in found[:SHOWN_BREAKS]],
                         timezone.now(), time.monotonic() - started, found,
                         _per_namespace() if resource_uid is None else {})
    if resource_uid is None:
        with _lock:
            _last = status
    return status.visible_to(namespaces)


_redis_lock = threading.Lock()
_redis: dict[str, redis.Redis] = {}


def _slots() -> redis.Redis:
    url = settings.REDIS_URL
    with _redis_lock:
        client = _redis.get(url)
        if client is None:
            client = _redis[url] = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        return client


def audit_verify_interval() -> float:
    """Seconds between two full verifications one user may ask (setting OPSCONSOLE_AUDIT_VERIFY_INTERVAL_SECONDS,
    default 60)."""
    return float(getattr(settings, "OPSCONSOLE_AUDIT_VERIFY_INTERVAL_SECONDS", 60))


def audit_verify_wait(actor: str) -> float:
    """Take `actor`'s verification slot: 0.0 when taken now (the caller may verify), else the seconds until the
    next one (one full verification per user per `audit_verify_interval`, counted in Redis, shared by every web
    process)."""
    interval = audit_verify_interval()
    if interval <= 0:
        return 0.0
    client = _slots()
    key = VERIFY_SLOT_PREFIX + actor
    if client.set(key, "1", nx=True, px=max(1, round(interval * 1000))):
        return 0.0
    left = client.pttl(key)
    return max(left, 1) / 1000 if left and left > 0 else 1.0
