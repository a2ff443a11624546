"""The controller's periodic steps while it leads: the healing step (healing.evaluator: anomaly rules, rollbacks,
expired suspensions) and the signed audit checkpoint (reconcilers.engine.checkpoint). A failure of either is logged;
the next one comes on time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reconcilers.engine.controller.dbconn import close_old_db_connections

log = logging.getLogger(__name__)


class HealingStep:
    """Runs `heal()` every `interval` seconds (0: never); what it returns says whether it did work (`did`)."""

    def __init__(self, heal: Callable[[], Any] | None, interval: float) -> None:
        self.heal, self.interval = heal, interval
        self.heals = 0  # steps run (tests and logs)

    def __call__(self) -> bool:
        """One healing step; the keys it names are enqueued with the others."""
        if self.heal is None:
            return False
        close_old_db_connections()
        try:
            report = self.heal()
        except Exception:
            log.warning("controller: the healing step failed", exc_info=True)
            return False
        self.heals += 1
        return bool(getattr(report, "did", False))


class CheckpointStep:
    """Writes a signed checkpoint of the audit record (`write(api)`) every `seconds` (0: none)."""

    def __init__(self, write: Callable[[Any], Any], api: Any, seconds: float) -> None:
        self.write, self.api, self.seconds = write, api, seconds
        self.checkpoints = 0  # written (tests and logs)

    def __call__(self) -> bool:
        """One checkpoint; True when written."""
        try:
            self.write(self.api)
        except Exception:
            log.warning("controller: could not write an audit checkpoint", exc_info=True)
            return False
        self.checkpoints += 1
        return True
