"""The webhook server: `POST /validate/<group>/<plural>` and `POST /mutate/<group>/<plural>` answer AdmissionReview
v1 requests for the registered kinds (reconcilers.engine.admission), `POST /convert/<group>/<plural>`
ConversionReview v1 requests for kinds with several versions (reconcilers.engine.conversion), over TLS only,
optionally verifying the API server's client certificate (mutual TLS); `GET /healthz`; `GET /metrics` with
controller-runtime's webhook metrics. Each admission decision goes to the recorder (opsconsole.webhooks.recorder)
and the answer goes back at once.

`WebhookServer(...).start()` serves on a thread of its own (the command waits for a signal; tests stop it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import threading
import time
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from opsconsole.webhooks.recorder import DecisionRecorder
from reconcilers.engine import registry
from reconcilers.engine.admission import MUTATE, VALIDATE, ReviewError, review_mutate, review_validate
from reconcilers.engine.conversion import ConversionError, review_convert

CONVERT = "convert"
UNKNOWN = "unknown"  # the metrics' webhook label of a path that is none of ours

log = logging.getLogger(__name__)


class WebhookMetrics:
    """controller-runtime's webhook metrics, labelled by webhook path (and code); every path that is not a
    registered kind's webhook shares the label `unknown`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("controller_runtime_webhook_requests_total", "Admission requests by webhook and "
                                "HTTP code", ["webhook", "code"], registry=self.registry)
        self.latency = Histogram("controller_runtime_webhook_latency_seconds", "Admission request latency",
                                 ["webhook"], registry=self.registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.in_flight = Gauge("controller_runtime_webhook_requests_in_flight", "Admission requests being served",
                               ["webhook"], registry=self.registry)


def build_app(recorder: DecisionRecorder, metrics: WebhookMetrics) -> web.Application:
    """The aiohttp application."""

    def decide_and_hand_over(decide: Any, rec: Any, body: Any, path: str) -> Any:
        decision = decide(rec, body)
        recorder.put(decision, path)  # durable before the answer goes back
        return decision

    async def review(request: web.Request) -> web.Response:
        action, group, plural = request.match_info["action"], request.match_info["group"], request.match_info[
            "plural"]
        path = label = request.path
        started = time.perf_counter()
        code = 200
        rec = None
        if action in (VALIDATE, MUTATE, CONVERT):
            try:
                rec = registry.for_kind(group, plural)
            except (registry.UnknownKind, ValueError):
                pass
        if rec is None:  # not one of ours: one label for all of them (a caller cannot grow the metrics)
            label = UNKNOWN
        metrics.in_flight.labels(label).inc()
        try:
            if rec is None:
                code = 404
                return web.json_response({"error": f"no webhook {action!r} for a registered kind {plural}.{group}"},
                                         status=404)
            try:
                body = await request.json()
            except (ValueError, json.JSONDecodeError):
                code = 400
                return web.json_response({"error": "the body is not JSON"}, status=400)
            loop = asyncio.get_running_loop()
            if action == CONVERT:  # conversions are not decisions: answered, not recorded
                try:
                    response = await loop.run_in_executor(None, review_convert, rec, body)
                except ConversionError as exc:
                    code = 400
                    return web.json_response({"error": str(exc)}, status=400)
                return web.json_response({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                                          "response": response})
            decide = review_validate if action == VALIDATE else review_mutate
            try:  # a kind's hooks are plain functions, and the hand-over a network call: off the loop
                decision = await loop.run_in_executor(None, decide_and_hand_over, decide, rec, body, path)
            except ReviewError as exc:
                code = 400
                return web.json_response({"error": str(exc)}, status=400)
            return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                      "response": decision.response()})
        finally:
            metrics.in_flight.labels(label).dec()
            metrics.requests.labels(label, str(code)).inc()
            metrics.latency.labels(label).observe(time.perf_counter() - started)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def metrics_page(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/{action}/{group}/{plural}", review)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    return app


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
    """The server on a thread of its own: `start()` returns the bound port, `stop()` flushes the recorder."""

    def __init__(self, context: ssl.SSLContext, host: str = "127.0.0.1", port: int = 0) -> None:
        self.context, self.host, self.port = context, host, port
        self.recorder = DecisionRecorder()
        self.metrics = WebhookMetrics()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> int:
        self.recorder.start()
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._runner = web.AppRunner(build_app(self.recorder, self.metrics), access_log=None)
                loop.run_until_complete(self._runner.setup())
                site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.context)
                loop.run_until_complete(site.start())
                self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="webhook-server", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or errors:
            raise RuntimeError(f"the webhook server did not start: {errors[0] if errors else 'timeout'}")
        log.info("webhook server listening on https://%s:%d", self.host, self.port)
        return self.port

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self.recorder.stop()

    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"
