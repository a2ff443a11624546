"""Watch streams: newline-delimited JSON events, resourceVersion replay, 410 Gone, bookmarks, timeouts."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import errors
from kubesim.meta import dumps_bytes
from kubesim.registry import ResourceType
from kubesim.selectors import parse_field_selector, parse_label_selector
from kubesim.server.http import Accept, flag
from kubesim.store import Event
from kubesim.table import to_table

if TYPE_CHECKING:
    from kubesim.simulator import Simulator


class _Renderer:
    """Turns store events into watch lines for one watcher (selector transitions, Table, conversion)."""

    def __init__(self, rt: ResourceType, version: str, accept: Accept, label: Any, field: Any, include: str) -> None:
        self.rt, self.version, self.accept = rt, version, accept
        self.label, self.field, self.include = label, field, include
        self.filtered = label is not None or field is not None

    def _matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        ext = self.rt.external(obj, self.version)
        return (self.label is None or self.label(ext)) and (self.field is None or self.field(ext))

    def line(self, etype: str, obj: dict[str, Any]) -> bytes:
        ext = self.rt.external(obj, self.version)
        if self.accept.table:
            payload: Any = to_table(self.rt, self.version, [ext], include=self.include,
                                    table_version=self.accept.table_version)
        elif self.accept.partial:
            payload = {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{self.accept.table_version}",
                       "metadata": ext["metadata"]}
        else:
            payload = ext
        return dumps_bytes({"type": etype, "object": payload}) + b"\n"

    def event_line(self, ev: Event) -> bytes | None:
        etype = ev.type
        if self.filtered:
            now_match = self._matches(ev.obj) if etype != "DELETED" else False
            was_match = self._matches(ev.prev)
            if etype == "DELETED":
                if not was_match:
                    return None
            elif now_match and not was_match:
                etype = "ADDED"
            elif was_match and not now_match:
                etype = "DELETED"
            elif not now_match:
                return None
        if not self.accept.table and not self.accept.partial and self.rt.convert_out is None:
            cache_key = (etype, self.version)
            cached = ev.lines.get(cache_key) if ev.lines is not None else None
            if cached is None:
                cached = self.line(etype, ev.obj)
                if ev.lines is None:
                    ev.lines = {}
                ev.lines[cache_key] = cached
            return cached
        return self.line(etype, ev.obj)

    def bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.rt.kind, "apiVersion": self.rt.api_version(self.version), "metadata": meta}
        return dumps_bytes({"type": "BOOKMARK", "object": obj}) + b"\n"


def _drop_connection(sim: Simulator, request: web.Request) -> None:
    """The watch_cut_interval fault: close the connection mid-stream, without ending the chunked body (as a
    proxy or a restarting API server does), so the client sees the stream break rather than end."""
    sim.watches_cut += 1
    if request.transport is not None:
        request.transport.close()


_LINES_PER_WRITE = 256  # watch lines written in one chunk at most


async def _write_lines(resp: web.StreamResponse, lines: list[bytes], sent: int, cut_after: int) -> tuple[int, bool]:
    """Write the watch `lines` waiting for one watcher as one chunk (one send on the socket, not one per event: a
    burst of changes reaches a watcher in a few writes), up to the `watch_cut_after` fault. Returns the lines sent
    in all and whether the fault's count was reached (the stream ends there)."""
    if cut_after:
        lines = lines[:max(cut_after - sent, 0)]
    if lines:
        await resp.write(b"".join(lines))
        sent += len(lines)
    return sent, bool(cut_after) and sent >= cut_after


async def serve_watch(sim: Simulator, request: web.Request, rt: ResourceType, version: str,
                      namespace: str | None, accept: Accept) -> web.StreamResponse:
    """Stream watch events until the timeout, a fault cut, shutdown or the client going away."""
    q = request.query
    label = parse_label_selector(q.get("labelSelector"))
    field = parse_field_selector(q.get("fieldSelector"), rt.field_selectors)
    timeout = float(q.get("timeoutSeconds") or sim.options.default_watch_timeout)
    bookmarks = flag(q, "allowWatchBookmarks")
    send_initial = flag(q, "sendInitialEvents")
    rv_param = q.get("resourceVersion") or ""
    renderer = _Renderer(rt, version, accept, label, field, q.get("includeObject", "Metadata"))
    store = sim.store
    ns = namespace if rt.namespaced else None
    # everything up to subscribe() runs without yielding, so no event can fall between replay and live
    initial: list[bytes] = []
    gone: errors.ApiError | None = None
    if rv_param in ("", "0") or send_initial:
        for obj in store.items(rt.key, ns):
            if renderer._matches(obj) if renderer.filtered else True:
                initial.append(renderer.line("ADDED", obj))
        if send_initial and bookmarks:
            initial.append(renderer.bookmark(store.rv, initial_end=True))
        watcher = store.subscribe(rt.key, ns)
    else:
        try:
            since = int(rv_param)
        except ValueError as e:
            raise errors.bad_request(f"invalid resource version: {rv_param}") from e
        replay = store.history_since(rt.key, ns, since)
        if replay is None:
            oldest = store.history[0].rv if store.history else store.rv
            gone = errors.gone(f"too old resource version: {since} ({oldest})")
            watcher = None
        else:
            watcher = store.subscribe(rt.key, ns)
            for ev in replay:
                line = renderer.event_line(ev)
                if line is not None:
                    initial.append(line)
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                   "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    if gone is not None:
        await resp.write(dumps_bytes({"type": "ERROR", "object": gone.status()}) + b"\n")
        await resp.write_eof()
        return resp
    assert watcher is not None
    cut_after = sim.options.faults.watch_cut_after
    sent = 0
    opened = time.monotonic()
    deadline = opened + timeout
    next_bookmark = opened + sim.options.bookmark_interval
    sim.active_watches += 1
    try:
        for start in range(0, len(initial), _LINES_PER_WRITE):
            sent, cut = await _write_lines(resp, initial[start:start + _LINES_PER_WRITE], sent, cut_after)
            if cut:
                return resp
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            cut_interval = sim.options.faults.watch_cut_interval  # read each time: a change reaches open watches
            if cut_interval > 0 and now >= opened + cut_interval:
                _drop_connection(sim, request)
                return resp
            if bookmarks and now >= next_bookmark and watcher.queue.empty():
                await resp.write(renderer.bookmark(store.rv))
                next_bookmark = now + sim.options.bookmark_interval
            wait = min(deadline - now, 1.0)  # wake at least every second: a fault switched on reaches open watches
            if cut_interval > 0:
                wait = min(wait, opened + cut_interval - now)
            if bookmarks:
                wait = min(wait, max(next_bookmark - now, 0.0))
            try:
                ev = await asyncio.wait_for(watcher.queue.get(), timeout=max(wait, 0.001))
            except TimeoutError:
                if request.transport is None or request.transport.is_closing():
                    break
                continue
            if ev is None:
                break
            chunk = [renderer.event_line(ev)]
            while not watcher.queue.empty() and len(chunk) < _LINES_PER_WRITE:
                nxt = watcher.queue.get_nowait()
                if nxt is None:
                    watcher.closed = True
                    break
                chunk.append(renderer.event_line(nxt))
            sent, cut = await _write_lines(resp, [line for line in chunk if line is not None], sent, cut_after)
            if cut:
                return resp
            if watcher.closed:
                break
    except ConnectionResetError:
        pass
    finally:
        sim.active_watches -= 1
        store.unsubscribe(watcher)
    try:
        await resp.write_eof()
    except ConnectionResetError:
        pass
    return resp
