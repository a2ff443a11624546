"""The audit chain's verification status for the console: verifying every chain reads every transition, so
the last full result is kept (with when it ran and how long it took) and re-run only when asked; one
resource's chain is cheap and is verified on demand."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from reconcilers.engine.audit import chain_verify


@dataclass(frozen=True)
class ChainStatus:
    """One verification: intact or the first breaks, how many chains and rows, when and how long it took."""

    ok: bool
    chains: int
    transitions: int
    breaks: list[str]
    checked_at: datetime
    seconds: float


_lock = threading.Lock()
_last: ChainStatus | None = None


def audit_chain_status(*, refresh: bool = False, resource_uid: str | None = None) -> ChainStatus | None:
    """The last full verification (None when none ran in this process), or a fresh one with `refresh`; with
    `resource_uid`, that resource's chain verified now."""
    global _last
    if resource_uid is None and not refresh:
        return _last
    started = time.monotonic()
    report = chain_verify(resource_uid)
    status = ChainStatus(report.ok, report.chains, report.transitions, [b.describe() for b in report.breaks[:10]],
                         timezone.now(), time.monotonic() - started)
    if resource_uid is None:
        with _lock:
            _last = status
    return status
