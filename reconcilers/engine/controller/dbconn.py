"""The controller's threads drop a broken or expired database connection before using it (a long-running process
must); never inside a transaction (a test's)."""

from __future__ import annotations

import logging

from django.db import close_old_connections, connection

log = logging.getLogger(__name__)


def close_old_db_connections() -> None:
    """Drop a broken or expired DB connection before using it; a failure is only logged (debug)."""
    try:
        if not connection.in_atomic_block:  # never inside a transaction (e.g. a test's)
            close_old_connections()
    except Exception:
        log.debug("could not check DB connections", exc_info=True)
