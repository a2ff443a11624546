"""A controller step on a thread of its own: the Events archive and the healing step, which may wait on the API
server (an owner lookup) or on the database for a while, run beside the loop so that they never hold up
enqueueing and the release of delayed keys (`build_controller(background=True)`, as `runcontroller` builds it).

The step is the same function the loop calls inline when not in the background (tests drive it so): it returns
whether it did work; the thread runs it again at once when it did, else after `idle` seconds. A step that raises
is logged and tried again after `idle`. The thread uses its own database connection, closed when it stops.

The thread is supervised (`reconcilers.engine.supervise`, named `controller-<name>`): what its loop does not catch
(the database refusing `close_old_connections`, a `SystemExit` in a step) ends the loop, the thread is reported
down by the controller's `/healthz` while it waits its backoff, then started again and counted in
`opsconsole_thread_restarts_total{thread="controller-<name>"}`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django import db

from reconcilers.engine import supervise

log = logging.getLogger(__name__)


class BackgroundStep:
    """Runs `step()` until `stop()` on a supervised thread (see the module docstring); `supervision` goes to
    `supervise.Supervised` (backoff, pause)."""

    def __init__(self, name: str, step: Callable[[], bool], idle: float, **supervision: Any) -> None:
        self.name = f"controller-{name}"
        self.step, self.idle = step, max(0.01, idle)
        self.supervised = supervise.Supervised(self.name, self._loop, **supervision)

    def start(self) -> BackgroundStep:
        """Start the supervised thread."""
        self.supervised.start()
        return self

    def _loop(self) -> None:
        stopping = self.supervised.stopping
        try:
            while not stopping.is_set():
                db.close_old_connections()  # looked up at each call: tests put a failing one in its place
                try:
                    did = self.step()
                except Exception:
                    log.warning("controller: the %s step failed", self.name, exc_info=True)
                    did = False
                if not did:
                    stopping.wait(self.idle)
        finally:
            db.connections.close_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to end after its current step and wait for it."""
        self.supervised.stop(timeout)

    def is_alive(self) -> bool:
        """Whether its thread runs (its step or a backoff before it is started again)."""
        return self.supervised.is_alive()

    @property
    def up(self) -> bool:
        """Whether its loop runs (False while it waits to be started again)."""
        return self.supervised.up
