"""Admin controls of the workqueue: retry a backing-off or delayed key now, reset a key's backoff."""

from __future__ import annotations

from dataclasses import dataclass

from reconcilers.core.types import Request
from reconcilers.engine import dispatch
from reconcilers.services.selectors.filters import InvalidFilter


@dataclass(frozen=True)
class QueueControlResult:
    """What a control did: `changed` (a retry was moved / a failure count reset) and the failures before."""

    key: str
    changed: bool
    failures_before: int


def queue_key_parse(key: str) -> Request:
    """A workqueue key checked for shape (InvalidFilter on the `key` field otherwise)."""
    try:
        return Request.from_key(key)
    except ValueError as exc:
        raise InvalidFilter("key", f"not a reconcile key (group/version/plural/namespace/name): {exc}") from exc


def queue_retry_now(key: str) -> QueueControlResult:
    """Release a delayed or backing-off key now (dispatching it), or re-send a queued key whose task may have been
    lost (stuck in "sent"; a copy of a task only waiting finds nothing to claim). `changed` False: it was
    neither waiting nor queued (or it is processing: its run's end sends it again)."""
    queue_key_parse(key)
    failures = dispatch.get_queue().failures(key)
    return QueueControlResult(key, dispatch.retry_now(key), failures)


def queue_reset_backoff(key: str) -> QueueControlResult:
    """Reset a key's failure count, so its next failure backs off from the base delay again."""
    queue_key_parse(key)
    queue = dispatch.get_queue()
    failures = queue.failures(key)
    queue.reset_backoff(key)
    return QueueControlResult(key, failures > 0, failures)
