"""Bounded connections for the webhook server: what one connection may cost, and for how long.

aiohttp alone keeps an idle connection for an hour (its keep-alive timeout) and a half-sent request forever, and
asyncio allocates a 256 KiB TLS buffer for every accepted connection before its handshake even starts, so idle
connections used to take the server past its memory limit. Here the listener accepts plain TCP and a `Gate`
decides, per connection, before any TLS state exists:

- at most `max_connections` at once: one more arriving evicts the oldest connection that is not deciding a review
  (still shaking hands, sending its request, or idle between requests); when every one is deciding, the new one is
  closed at once. A flood of idle connections therefore never locks the API server out: its connection evicts the
  oldest idle one;
- TLS is started only then (`loop.start_tls`), the handshake bounded by `handshake_timeout`;
- the request's head must arrive within `header_timeout` of the handshake, its body within `read_timeout` of its
  head; an idle keep-alive connection is closed after `keepalive_timeout`. A connection that misses its deadline is
  aborted (no TLS close handshake to wait for).

`Gate.middleware` is the aiohttp middleware that moves a connection through these states; the body limit is the
application's `client_max_size` (413). Without a TLS context (the metrics port) the same bounds apply to plain HTTP.

asyncio gives every TLS connection a 256 KiB read buffer (`sslproto.SSLProtocol.max_size`), most of what a held
connection costs; a review arrives in TLS records of 16 KiB, so the process's buffer is made `TLS_READ_BUFFER`
(64 KiB) when a Gate is made: more reads of a large body, a quarter of the memory per connection.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import logging
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

HANDSHAKE, HEAD, BODY, WORKING, IDLE = "handshake", "head", "body", "working", "idle"
TLS_READ_BUFFER = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """The bounds of one listener (seconds, connections)."""

    max_connections: int = 200
    handshake_timeout: float = 5.0
    header_timeout: float = 10.0
    read_timeout: float = 10.0
    keepalive_timeout: float = 30.0


class _Conn:
    """One accepted connection: its state, its deadline, its transports."""

    __slots__ = ("gate", "raw", "transport", "state", "timer", "released", "task")

    def __init__(self, gate: Gate, raw: asyncio.Transport) -> None:
        self.gate, self.raw = gate, raw
        self.transport: asyncio.BaseTransport | None = None
        self.state = HANDSHAKE
        self.timer: asyncio.TimerHandle | None = None
        self.released = False
        self.task: asyncio.Task[None] | None = None

    def deadline(self, state: str, seconds: float | None) -> None:
        """Enter `state`; abort the connection unless it leaves it within `seconds` (None: no deadline)."""
        self.state = state
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if seconds is not None:
            self.timer = self.gate.loop.call_later(seconds, self.expire)

    def expire(self) -> None:
        self.gate.on_timeout(self.state)
        self.abort()

    def abort(self) -> None:
        (self.transport or self.raw).abort()
        if self.transport is not None and not self.raw.is_closing():
            self.raw.abort()
        self.release()

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        if self.timer is not None:
            self.timer.cancel()
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.gate.forget(self)


class _AppSide(asyncio.Protocol):
    """The aiohttp request handler behind the connection, told of it only once the handshake is done (and only
    then of its end)."""

    def __init__(self, conn: _Conn, handler: asyncio.Protocol) -> None:
        self.conn, self.handler, self.made = conn, handler, False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True
        self.handler.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.release()
        if self.made:
            self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self.handler.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        return self.handler.eof_received()  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()


class _Accepting(asyncio.Protocol):
    """The listener's protocol: admits or refuses the TCP connection, then starts TLS and hands it over."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.conn: _Conn | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.conn = self.gate.admit(transport)
        if self.conn is None:
            return
        transport.pause_reading()  # nothing is read before the handshake owns the socket
        self.conn.task = self.gate.loop.create_task(self.gate.hand_over(self.conn))

    def connection_lost(self, exc: Exception | None) -> None:  # before the hand-over only
        if self.conn is not None:
            self.conn.release()


class Gate:
    """The listener's admission of connections (see the module)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handler_factory: Callable[[], asyncio.Protocol],
                 context: ssl.SSLContext | None, limits: Limits,
                 on_event: Callable[[str], None] | None = None) -> None:
        self.loop, self.handler_factory, self.context, self.limits = loop, handler_factory, context, limits
        if asyncio.sslproto.SSLProtocol.max_size > TLS_READ_BUFFER:
            asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
        self.on_event = on_event or (lambda event: None)
        self.open: OrderedDict[int, _Conn] = OrderedDict()  # oldest first
        self.by_transport: dict[int, _Conn] = {}
        self._middleware: Any = None
        self.closed = 0  # connections ended so far

    def protocol(self) -> asyncio.Protocol:
        """The protocol factory for `loop.create_server`."""
        return _Accepting(self)

    def admit(self, raw: asyncio.Transport) -> _Conn | None:
        if len(self.open) >= self.limits.max_connections:
            victim = next((c for c in self.open.values() if c.state != WORKING), None)
            if victim is None:
                self.on_event("refused")
                raw.abort()
                return None
            self.on_event("evicted")
            victim.abort()
        conn = _Conn(self, raw)
        self.open[id(conn)] = conn
        conn.deadline(HANDSHAKE, self.limits.handshake_timeout + 1.0)
        return conn

    async def hand_over(self, conn: _Conn) -> None:
        app = _AppSide(conn, self.handler_factory())
        if self.context is None:
            conn.raw.set_protocol(app)
            transport: asyncio.BaseTransport = conn.raw
            conn.raw.resume_reading()
        else:
            try:
                transport = await self.loop.start_tls(conn.raw, app, self.context, server_side=True,
                                                      ssl_handshake_timeout=self.limits.handshake_timeout)
            except (OSError, ssl.SSLError, TimeoutError, ConnectionError, RuntimeError) as exc:
                self.on_event("handshake_failed")
                log.debug("webhook connection: TLS handshake failed: %s", exc)
                conn.abort()
                return
            if transport is None or conn.released:
                conn.abort()
                return
        conn.transport = transport
        self.by_transport[id(transport)] = conn
        conn.deadline(HEAD, self.limits.header_timeout)
        app.connection_made(transport)

    def forget(self, conn: _Conn) -> None:
        self.closed += 1
        self.open.pop(id(conn), None)
        if conn.transport is not None:
            self.by_transport.pop(id(conn.transport), None)

    def on_timeout(self, state: str) -> None:
        self.on_event(f"timeout_{state}")

    def close_all(self) -> None:
        for conn in list(self.open.values()):
            conn.abort()

    def middleware(self) -> Callable[[web.Request, Callable[[web.Request], Awaitable[web.StreamResponse]]],
                                     Awaitable[web.StreamResponse]]:
        """The aiohttp middleware that gives a request's body its deadline and an idle connection its own."""
        if self._middleware is not None:
            return self._middleware

        @web.middleware
        async def bounded(request: web.Request,
                          handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
            conn = self.by_transport.get(id(request.transport))
            if conn is not None:
                conn.deadline(BODY, self.limits.read_timeout)
            if request.can_read_body:
                await request.read()  # cached for the handler; a 413 past client_max_size
            if conn is not None:
                conn.deadline(WORKING, None)
            try:
                return await handler(request)
            finally:
                if conn is not None and not conn.released:
                    conn.deadline(IDLE, self.limits.keepalive_timeout)
                    self.open.move_to_end(id(conn))  # the least recently used is evicted first

        self._middleware = bounded
        return bounded

    def count(self) -> int:
        """Connections open now."""
        return len(self.open)


def peer_of(request: web.Request) -> dict[str, Any]:
    """The caller of a request: its address and its client certificate's subject CN ('' without one)."""
    transport = request.transport
    if transport is None:
        return {"address": "", "cn": ""}
    peername = transport.get_extra_info("peername")
    address = peername[0] if isinstance(peername, tuple) and peername else ""
    cert = transport.get_extra_info("peercert") or {}
    cn = ""
    for rdn in cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                cn = str(value)
    return {"address": str(address), "cn": cn}
