"""A controller step on a thread of its own: the Events archive and the healing step, which may wait on the API
server (an owner lookup) or on the database for a while, run beside the loop so that they never hold up
enqueueing and the release of delayed keys (`Controller(background=True)`, as `runcontroller` builds it).

The step is the same function the loop calls inline when not in the background (tests drive it so): it returns
whether it did work; the thread runs it again at once when it did, else after `idle` seconds. A step that raises
is logged and tried again after `idle`. The thread uses its own database connection, closed when it stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class BackgroundStep(threading.Thread):
    """Runs `step()` until `stop()` (see the module docstring)."""

    def __init__(self, name: str, step: Callable[[], bool], idle: float) -> None:
        super().__init__(name=f"controller-{name}", daemon=True)
        self.step, self.idle = step, max(0.01, idle)
        self._stop_event = threading.Event()

    def run(self) -> None:
        from django.db import close_old_connections, connections

        try:
            while not self._stop_event.is_set():
                close_old_connections()
                try:
                    did = self.step()
                except Exception:
                    log.warning("controller: the %s step failed", self.name, exc_info=True)
                    did = False
                if not did:
                    self._stop_event.wait(self.idle)
        finally:
            connections.close_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to end after its current step and wait for it."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)
