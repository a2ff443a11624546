"""Live verbosity for the API and the console (`reconcilers.engine.verbosity` holds the mechanism): set one object's,
one kind's or every run's log level per module until an expiry, clear it, list what is in force, and read the lines
a verbose run kept. The callers authorise (an object: the operator role in its namespace; a kind or everything: the
admin role) and audit every change.

A setting lasts `minutes` (1 to 1440); it switches itself off then, on every worker, with no restart: the workers
read the settings at most every few seconds and ignore an expired one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from reconcilers.engine import dispatch, verbosity
from reconcilers.engine.capture_store import capture_lines, verbose_run_ids
from reconcilers.engine.verbosity import Setting, VerbosityError

__all__ = ["MAX_MINUTES", "RunLines", "Setting", "VerbosityError", "run_lines", "verbosity_clear", "verbosity_list",
           "verbosity_set", "verbose_runs"]

MAX_MINUTES = int(verbosity.MAX_SECONDS // 60)


@dataclass
class RunLines:
    """The log lines a verbose run kept."""

    run_id: int
    level: str
    lines: list[str]
    dropped: int


def _store() -> verbosity.Store:
    return verbosity.Store.of(dispatch.get_queue())


def verbosity_set(scope: str, modules: str, minutes: float, *, actor: str) -> Setting:
    """Turn `scope` (`object:<key>`, `kind:<Kind>`, `all`) to `modules` (`reconcile=debug,client=debug`) for
    `minutes`. VerbosityError naming the field otherwise."""
    verbosity.scope_check(scope)
    parsed = verbosity.parse_modules(modules)
    if not 1 <= minutes <= MAX_MINUTES:
        raise VerbosityError(f"minutes must be 1 to {MAX_MINUTES}", "minutes")
    now = time.time()
    setting = Setting(scope, parsed, now + minutes * 60, actor=actor, set_at=now)
    verbosity.setting_store(_store(), setting)
    verbosity.CACHE.forget()
    return setting


def verbosity_clear(scope: str) -> bool:
    """Switch `scope`'s verbosity off now; whether one was set."""
    cleared = verbosity.setting_clear(_store(), scope)
    verbosity.CACHE.forget()
    return cleared


def verbosity_list() -> list[Setting]:
    """The settings in force, soonest to expire first."""
    return sorted(verbosity.settings_read(_store()).values(), key=lambda s: s.until)


def run_lines(run_id: int) -> RunLines | None:
    """The log lines run `run_id` kept (None: it was not a verbose run)."""
    found = capture_lines(run_id)
    return RunLines(run_id, *found) if found is not None else None


def verbose_runs(run_ids: list[int]) -> set[int]:
    """Which of these runs were verbose (kept log lines at /runs/<id>/log/)."""
    return verbose_run_ids(run_ids)
