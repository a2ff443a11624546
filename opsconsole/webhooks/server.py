"""The webhook server: the reviews over mutual TLS (opsconsole.webhooks.app), only for callers whose client
certificate the client CA signed (the API server), and the metrics and health on a plain HTTP port of their own.

A server whose TLS context does not require a client certificate refuses to start unless told `insecure=True`
(`runwebhooks --insecure-skip-client-verify`, logged loudly): without it anyone who reaches the port could write
the action record. Connections are bounded (opsconsole.webhooks.connections): a limit, handshake, header, body and
keep-alive timeouts, a body limit. Every few seconds the server looks at the decision recorder and starts its thread
again if it died (`opsconsole_thread_restarts_total{thread="admission-recorder"}`).

`WebhookServer(...).start()` serves on a thread of its own (the command waits for a signal; tests stop it).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import ssl
import threading
from typing import Any

from aiohttp import web

from opsconsole.webhooks.app import WebhookMetrics, build_app, build_metrics_app
from opsconsole.webhooks.connections import Gate, Limits
from opsconsole.webhooks.recorder import DecisionRecorder
from reconcilers.core.clusters import DEFAULT_CLUSTER, cluster_name_check

__all__ = ["CertificateReloader", "Limits", "WebhookServer", "build_app", "tls_context"]

SUPERVISE_SECONDS = 2.0
RECORDER_THREAD = "admission-recorder"
INSECURE_WARNING = ("webhook server: client certificates are NOT verified (--insecure-skip-client-verify): anyone "
                    "who reaches the port can send a review and write the action record as any user")

log = logging.getLogger(__name__)


def _malloc_trim() -> Any:
    """glibc's malloc_trim, or None elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


MALLOC_TRIM = _malloc_trim()


def tls_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """The serving TLS context; with `client_ca`, a client certificate signed by it is required."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


class CertificateReloader:
    """Serve a renewed certificate without a restart and without dropping a request: every `interval` seconds,
    `renew()` (when given: the generated certificates' renewal) runs, and when the certificate or key file
    changed (a rotated Secret, a renewal) a new TLS context is built from them and handshakes from then on use it
    (the listener's context hands each new connection the current one in its SNI callback). A context in use is
    never changed: loading a certificate into it while another thread shakes hands can break that handshake."""

    def __init__(self, context: ssl.SSLContext, cert: str, key: str, *, interval: float = 60.0,
                 renew: Any = None, client_ca: str | None = None) -> None:
        self.cert, self.key, self.client_ca, self.interval, self.renew = cert, key, client_ca, interval, renew
        self.current = context
        context.sni_callback = self._pick
        self.reloads = 0
        self._seen = self._stamp()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhook-cert-reloader", daemon=True)

    def _pick(self, connection: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        if self.current is not context:
            connection.context = self.current

    def _stamp(self) -> tuple[float, float, int, int]:
        c, k = os.stat(self.cert), os.stat(self.key)
        return c.st_mtime, k.st_mtime, c.st_size, k.st_size

    def check(self) -> bool:
        """Renew if due, and switch to the files' certificate if they changed; True when it switched."""
        if self.renew is not None:
            self.renew()
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self.current = tls_context(self.cert, self.key, self.client_ca)
        self._seen = stamp
        self.reloads += 1
        log.info("webhook server: serving certificate reloaded from %s", self.cert)
        return True

    def start(self) -> CertificateReloader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except (OSError, ssl.SSLError, ValueError):  # a half-written Secret: the next look gets it whole
                log.warning("webhook server: certificate not reloaded yet", exc_info=True)


class WebhookServer:
    """The server on a thread of its own: `start()` returns the bound port, `stop()` flushes the recorder.
    `metrics_port` (None: none) serves `/metrics` and `/healthz` over plain HTTP on `metrics_host`. `cluster`:
    the cluster whose API server calls it (its decisions and admitted writes are filed under it)."""

    def __init__(self, context: ssl.SSLContext, host: str = "127.0.0.1", port: int = 0, *,
                 metrics_host: str = "127.0.0.1", metrics_port: int | None = None, limits: Limits | None = None,
                 insecure: bool = False, recorder: DecisionRecorder | None = None,
                 cluster: str = DEFAULT_CLUSTER) -> None:
        if context.verify_mode != ssl.CERT_REQUIRED:
            if not insecure:
                raise ValueError("the webhook server requires client certificates (a client CA): without one anyone "
                                 "who reaches its port can write the action record; give a client CA, or "
                                 "insecure=True (--insecure-skip-client-verify) to run without")
            log.warning(INSECURE_WARNING)
        self.context, self.host, self.port = context, host, port
        self.cluster = cluster_name_check(cluster)  # the cluster whose API server calls it
        self.metrics_host, self.metrics_port = metrics_host, metrics_port
        self.limits = limits or Limits()
        self.metrics = WebhookMetrics()
        self.recorder = recorder or DecisionRecorder(on_restart=self._recorder_restarted)
        self.metrics.thread_restarts.labels(RECORDER_THREAD)  # shown as 0 from the start
        self.gate: Gate | None = None
        self.metrics_gate: Gate | None = None
        self._trimmed_at = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _recorder_restarted(self) -> None:
        self.metrics.thread_restarts.labels(RECORDER_THREAD).inc()

    def _event(self, event: str) -> None:
        self.metrics.connection_events.labels(event).inc()

    async def _listen(self, app: web.Application, context: ssl.SSLContext | None, host: str, port: int,
                      limits: Limits) -> tuple[web.AppRunner, asyncio.Server, Gate, int]:
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=limits.keepalive_timeout)
        await runner.setup()
        loop = asyncio.get_running_loop()
        assert runner.server is not None
        gate = Gate(loop, runner.server, context, limits, self._event)
        server = await loop.create_server(gate.protocol, host, port, backlog=min(1024, limits.max_connections * 4))
        return runner, server, gate, server.sockets[0].getsockname()[1]

    def start(self, timeout: float = 30.0) -> int:
        self.recorder.start()
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            opened: list[tuple[web.AppRunner, asyncio.Server]] = []
            try:
                gate_middleware = _late_middleware(lambda: self.gate)
                runner, server, self.gate, self.port = loop.run_until_complete(self._listen(
                    build_app(self.recorder, self.metrics, (gate_middleware,), self.cluster), self.context, self.host,
                    self.port, self.limits))
                opened.append((runner, server))
                if self.metrics_port is not None:
                    metrics_limits = Limits(max_connections=32, handshake_timeout=self.limits.handshake_timeout,
                                            header_timeout=self.limits.header_timeout, read_timeout=5.0,
                                            keepalive_timeout=self.limits.keepalive_timeout)
                    runner, server, self.metrics_gate, self.metrics_port = loop.run_until_complete(self._listen(
                        build_metrics_app(self.recorder, self.metrics, (_late_middleware(lambda: self.metrics_gate),)),
                        None, self.metrics_host, self.metrics_port, metrics_limits))
                    opened.append((runner, server))
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.call_later(SUPERVISE_SECONDS, self._supervise)
            loop.run_forever()
            for gate in (self.gate, self.metrics_gate):
                if gate is not None:
                    gate.close_all()
            for runner, server in opened:
                server.close()
                loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="webhook-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or errors:
            self.recorder.stop(0)
            raise RuntimeError(f"the webhook server did not start: {errors[0] if errors else 'timeout'}")
        log.info("webhook server listening on https://%s:%d%s", self.host, self.port,
                 f", metrics on http://{self.metrics_host}:{self.metrics_port}" if self.metrics_port else "")
        return self.port

    def _supervise(self) -> None:
        try:
            self.recorder.supervise()
            if self.gate is not None:
                self.metrics.connections.set(self.gate.count())
                churn = self.gate.closed
                if churn != self._trimmed_at and MALLOC_TRIM is not None:
                    # connections came and went: give their freed TLS buffers back to the system (glibc keeps a
                    # heap's free pages otherwise, and a flood of short connections leaves RSS at its high-water)
                    MALLOC_TRIM(0)
                    self._trimmed_at = churn
        finally:
            if self._loop is not None and self._loop.is_running():
                self._loop.call_later(SUPERVISE_SECONDS, self._supervise)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self.recorder.stop()

    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"


def _late_middleware(gate: Any) -> Any:
    """The gate's middleware, found when a request comes (the gate exists once the listener does)."""

    @web.middleware
    async def bounded(request: web.Request, handler: Any) -> web.StreamResponse:
        current = gate()
        if current is None:
            return await handler(request)
        return await current.middleware()(request, handler)

    return bounded
