"""Supervised background threads: a thread that dies is started again, counted, and reported down meanwhile.

A background thread of the engine (the worker's lease renewals, the controller's Events archive and healing
steps, its informers and leader election) runs a target meant to run until the process stops or until it is
asked to stop. Without supervision, an exception its own loop does not catch (a database error before its `try`,
a bug, a `SystemExit`) ends the thread for good and nothing notices: leases expire under running reconciles,
Events stop being archived, and `/healthz` still answers ok.

`Supervised(name, target).start()` runs `target()` on a daemon thread. When `target` raises or returns while
the thread was not asked to stop, the thread is *down*: it is logged, it waits a backoff (`min_backoff` doubling up
to `max_backoff`; back to `min_backoff` once a run lasted `healthy_after` seconds), then runs `target()` again
and counts the restart in `opsconsole_thread_restarts_total{thread=<name>}`. `threads()` says, for every
supervised thread of this process, whether it is up (its target running); `healthy()` is False while any is
down, and the controller's `/healthz` answers 503 then. `revive()` (called by `threads()`) starts again, and
counts, a supervised thread whose OS thread is gone without having been asked to stop.

`stop()` asks the thread to stop (`stopping` is set: a target waits on it instead of sleeping) and unregisters it,
so a thread stopped on purpose is never reported down.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from reconcilers.engine.metrics import THREAD_RESTARTS

log = logging.getLogger(__name__)

_lock = threading.Lock()
_registry: dict[str, Supervised] = {}


class Supervised:
    """One supervised background thread (see the module docstring)."""

    def __init__(self, name: str, target: Callable[[], Any], *, min_backoff: float = 0.5, max_backoff: float = 30.0,
                 healthy_after: float = 60.0, pause: Callable[[float], Any] | None = None) -> None:
        self.name, self.target = name, target
        self.min_backoff, self.max_backoff, self.healthy_after = min_backoff, max_backoff, healthy_after
        self.stopping = threading.Event()
        self.restarts = 0
        self._pause = pause or self.stopping.wait
        self._up = False
        self._pid = os.getpid()
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> Supervised:
        """Run the target on a daemon thread, registered under `name` (replacing a stopped one of that name)."""
        self.stopping.clear()
        self._pid = os.getpid()
        with _lock:
            _registry[self.name] = self
        self._spawn()
        return self

    def _spawn(self) -> None:
        self._up = True  # up from the start: a thread being started is not down
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def signal_stop(self) -> None:
        """Ask the thread to stop, without waiting; it is no longer reported."""
        self.stopping.set()
        with _lock:
            if _registry.get(self.name) is self:
                del _registry[self.name]

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to stop and wait for it (not when called from the thread itself)."""
        self.signal_stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and thread.is_alive():
            thread.join(timeout)

    def is_alive(self) -> bool:
        """Whether the OS thread runs (the target or a backoff)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def up(self) -> bool:
        """Whether the target is running: False while the thread waits to be started again, or is gone."""
        return self._up and self.is_alive()

    # -- the thread ---------------------------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            started = time.monotonic()
            self._up = True
            try:
                self.target()
            except BaseException:  # noqa: BLE001 - whatever ended it, the thread is started again
                if self.stopping.is_set():
                    break
                self._up = False
                log.exception("thread %s died", self.name)
            else:
                if self.stopping.is_set():
                    break
                self._up = False
                log.error("thread %s ended without being asked to", self.name)
            if time.monotonic() - started >= self.healthy_after:
                failures = 0
            delay = min(self.max_backoff, self.min_backoff * (2 ** min(failures, 30)))
            failures += 1
            log.warning("thread %s: starting it again in %.2fs", self.name, delay)
            self._pause(delay)
            if self.stopping.is_set():
                break
            self._restarted()
        self._up = False

    def _restarted(self) -> None:
        self.restarts += 1
        THREAD_RESTARTS.labels(self.name).inc()

    def _revive(self) -> bool:
        """Start the thread again when its OS thread is gone without a stop (True when it did)."""
        if self.stopping.is_set() or self.is_alive() or self._pid != os.getpid():
            return False
        log.error("thread %s is gone; starting it again", self.name)
        self._restarted()
        self._spawn()
        return True


def start(name: str, target: Callable[[], Any], **options: Any) -> Supervised:
    """`Supervised(name, target, **options).start()`."""
    return Supervised(name, target, **options).start()


def revive() -> list[str]:
    """Start again every supervised thread of this process whose OS thread is gone (the names)."""
    with _lock:
        mine = [s for s in _registry.values() if s._pid == os.getpid()]
    return [s.name for s in mine if s._revive()]


def threads() -> dict[str, bool]:
    """Every supervised thread of this process (not stopped on purpose) → whether it is up, after `revive()`."""
    revive()
    with _lock:
        return {name: s.up for name, s in sorted(_registry.items()) if s._pid == os.getpid()}


def healthy() -> bool:
    """False while any supervised thread of this process is down."""
    return all(threads().values())
