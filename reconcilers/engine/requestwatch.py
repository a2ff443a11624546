"""A watch over the Kubernetes requests one piece of work makes, for the code that must see or change them without
the step knowing: `kube.request_json` asks `current()` once per request (a ContextVar: one thread's or task's work,
never another's), and when a watch is set it may add query parameters to a write (`dryRun=All` for a what-if) and is
told every answer (the reads a kept run's replay needs, the admission verdicts of a what-if).

No Django, no Celery: the step and the tools around it use it as it is. With no watch set the cost is one
ContextVar read per request.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, Protocol

#: the methods that change nothing (never sent as a dry run)
READS = frozenset({"GET", "HEAD", "OPTIONS"})


class RequestWatch(Protocol):
    """What `kube.request_json` asks of a watch."""

    def query(self, method: str, path: str, query: dict[str, Any] | None) -> dict[str, Any] | None:
        """The query parameters to send with this request (the ones given, or more)."""

    def answered(self, method: str, path: str, body: Any, answer: Any, error: Exception | None) -> None:
        """The decoded answer to one request (None on error), or the error it raised."""


_current: ContextVar[RequestWatch | None] = ContextVar("opsconsole_request_watch", default=None)


def current() -> RequestWatch | None:
    """The watch of the work in progress, or None."""
    return _current.get()


@contextmanager
def watching(watch: RequestWatch) -> Iterator[RequestWatch]:
    """Every request made inside the block goes through `watch` (nested watches: the innermost one)."""
    token = _current.set(watch)
    try:
        yield watch
    finally:
        _current.reset(token)


def push(watch: RequestWatch) -> Token[RequestWatch | None]:
    """Set `watch` until `pop(token)` (for a watch that is itself a context manager)."""
    return _current.set(watch)


def pop(token: Token[RequestWatch | None]) -> None:
    """Put back the watch before the `push` that returned `token`."""
    _current.reset(token)
