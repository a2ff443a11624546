"""The controller's threads drop a broken or expired database connection before using it (a long-running process
must); never inside a transaction (a test's)."""

from __future__ import annotations

import logging

from django import db

log = logging.getLogger(__name__)


def close_old_db_connections() -> None:
    """Drop a broken or expired DB connection before using it; a failure is only logged (debug)."""
    try:
        if not db.connection.in_atomic_block:  # never inside a transaction (e.g. a test's)
            db.close_old_connections()  # looked up at each call, as a test may replace it
    except Exception:
        log.debug("could not check DB connections", exc_info=True)
