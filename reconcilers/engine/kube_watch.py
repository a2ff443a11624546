"""Watches (`kube`'s watch): `watch_objects` opens one from a resourceVersion and answers a `WatchStream` of
`WatchEvent`s, read line by line from the response; an ERROR event raises `ResourceExpired` (410: re-list) or
`WatchError`. `WatchStream.close()` from another thread ends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import jsonfast
from reconcilers.engine.kube_rest import _raw, collection_path


class WatchError(Exception):
    """The watch answered an ERROR event (a Status) other than 410."""

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message") or "watch error")
        self.status = status
        self.code = status.get("code")


class ResourceExpired(WatchError):
    """410 Gone: the resourceVersion is older than the server keeps. Re-list."""


@dataclass
class WatchEvent:
    """One watch event: ADDED, MODIFIED, DELETED or BOOKMARK, and the object."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class WatchStream:
    """The events of one watch request; iterate it. `close()` from another thread ends the iteration."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = bytearray()
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                if self._closed:
                    return
                buffer.extend(chunk)
                while (nl := buffer.find(b"\n")) != -1:
                    line = bytes(buffer[:nl]).strip()
                    del buffer[: nl + 1]
                    if line:
                        yield self._event(line)
            if buffer.strip() and not self._closed:
                yield self._event(bytes(buffer).strip())
        except Exception:
            if self._closed:  # closing from another thread breaks the read: that is the end, not an error
                return
            raise
        finally:
            self.close()

    @staticmethod
    def _event(line: bytes) -> WatchEvent:
        data = jsonfast.loads(line)
        etype = data.get("type", "")
        obj = data.get("object") or {}
        if etype == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(obj)
            raise WatchError(obj)
        return WatchEvent(etype, obj)

    def close(self) -> None:
        """End the stream (safe from any thread, idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._response.shutdown()  # interrupts a read blocked in another thread
        except Exception:
            pass
        try:
            self._response.close()  # the connection is not reused: a watch ends rarely
        except Exception:
            pass


def watch_objects(
    api: k8s.ApiClient,
    kind: ResourceKind,
    *,
    resource_version: str,
    namespace: str | None = None,
    label_selector: str | None = None,
    timeout_seconds: int = 300,
    allow_bookmarks: bool = True,
) -> WatchStream:
    """Open a watch from `resource_version`. Raises ApiException at once (e.g. 410) when refused; the
    stream raises ResourceExpired / WatchError on ERROR events."""
    resp = _raw(
        api,
        "GET",
        collection_path(kind, namespace),
        query={
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": allow_bookmarks,
            "labelSelector": label_selector,
            "timeoutSeconds": timeout_seconds,
        },
        timeout=(5.0, timeout_seconds + 30.0),
    )
    return WatchStream(resp)
