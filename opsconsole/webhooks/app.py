"""The webhook server's applications: the reviews on the TLS port, the metrics and health on a port of their own.

`POST /validate/<group>/<plural>` and `POST /mutate/<group>/<plural>` answer AdmissionReview v1 requests for the
registered kinds (reconcilers.engine.admission), `POST /convert/<group>/<plural>` ConversionReview v1 requests for
kinds with several versions (reconcilers.engine.conversion). A body that is not JSON, nests too deep or is not the
shape kube-apiserver sends is a 400 with the reason. Each admission decision carries its caller (the peer address
and the client certificate's CN) and goes to the recorder (opsconsole.webhooks.recorder) before the answer goes
back; with it, in the same Redis round trip, every admitted non-dry-run write is noted for the engine
(reconcilers.engine.admitted). One server serves one cluster (`cluster`, runwebhooks --cluster): its decisions
are filed under that cluster and its admitted writes noted on that cluster's lists.

The metrics application (`GET /metrics`, `GET /healthz`) is plain HTTP on its own port, so Prometheus and probes
need no client certificate; `/healthz` fails (503) while the decision recorder is down or its backlog is stuck.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from opsconsole.webhooks.connections import peer_of
from opsconsole.webhooks.recorder import DecisionRecorder
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine import registry
from reconcilers.engine.admission import MUTATE, VALIDATE, Decision, ReviewError, review_mutate, review_validate
from reconcilers.engine.admitted import admitted_commands, entry_from_request, signing_key
from reconcilers.engine.conversion import ConversionError, review_convert

CONVERT = "convert"
UNKNOWN = "unknown"  # the metrics' webhook label of a path that is none of ours
MAX_BODY = 6 * 1024 * 1024  # a review holds the object and the old one, each up to kube-apiserver's 3 MiB

log = logging.getLogger(__name__)


class WebhookMetrics:
    """controller-runtime's webhook metrics, labelled by webhook path (and code); every path that is not a
    registered kind's webhook shares the label `unknown`. And the server's own: connections, refusals, timeouts,
    restarts of its background threads."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("controller_runtime_webhook_requests_total", "Admission requests by webhook and "
                                "HTTP code", ["webhook", "code"], registry=self.registry)
        self.latency = Histogram("controller_runtime_webhook_latency_seconds", "Admission request latency",
                                 ["webhook"], registry=self.registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.in_flight = Gauge("controller_runtime_webhook_requests_in_flight", "Admission requests being served",
                               ["webhook"], registry=self.registry)
        self.connections = Gauge("opsconsole_webhook_connections", "Connections open on the webhook port",
                                 registry=self.registry)
        self.connection_events = Counter("opsconsole_webhook_connection_events_total",
                                         "Connections refused, evicted, timed out or failing their handshake",
                                         ["event"], registry=self.registry)
        self.thread_restarts = Counter("opsconsole_thread_restarts_total",
                                       "Background threads restarted after they died", ["thread"],
                                       registry=self.registry)
        self.recorder_backlog = Gauge("opsconsole_admission_recorder_backlog",
                                      "Admission decisions handed over and not recorded yet", registry=self.registry)


def _bad_request(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=400)


def parse_body(raw: bytes) -> Any:
    """The body as JSON, or a ReviewError naming why not (deep nesting included: never a RecursionError)."""
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ReviewError("the body nests too deep") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReviewError(f"the body is not JSON: {exc}") from exc


def build_app(recorder: DecisionRecorder, metrics: WebhookMetrics,
              middlewares: tuple[Any, ...] = (), cluster: str = DEFAULT_CLUSTER) -> web.Application:
    """The reviews' application (the TLS port) of the webhook server of `cluster`."""
    key = signing_key(settings.SECRET_KEY)

    def note_for(decision: Decision, body: dict[str, Any], peer: dict[str, str]) -> Callable[[Any], None] | None:
        if decision.webhook != VALIDATE or not decision.allowed or decision.dry_run:
            return None
        entry = entry_from_request(body["request"], peer=peer)

        def note(pipe: Any) -> None:
            admitted_commands(pipe, key, decision.group, decision.kind, decision.namespace, decision.name, entry,
                              cluster)

        return note

    def decide_and_hand_over(decide: Any, rec: Any, body: Any, path: str, peer: dict[str, str]) -> Decision:
        try:
            decision = decide(rec, body)
        except RecursionError as exc:
            raise ReviewError("the review nests too deep") from exc
        decision.peer_address, decision.peer_cn = peer["address"], peer["cn"]
        decision.cluster = cluster
        recorder.put(decision, path, note=note_for(decision, body, peer))  # durable before the answer goes back
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
            loop = asyncio.get_running_loop()
            try:
                body = parse_body(await request.read())
                if not isinstance(body, dict):
                    raise ReviewError("a review must be a JSON object")
                if action == CONVERT:  # conversions are not decisions: answered, not recorded
                    response = await loop.run_in_executor(None, review_convert, rec, body)
                    return web.json_response({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                                              "response": response})
                decide = review_validate if action == VALIDATE else review_mutate
                # a kind's hooks are plain functions, and the hand-over a network call: off the loop
                decision = await loop.run_in_executor(None, decide_and_hand_over, decide, rec, body, path,
                                                      peer_of(request))
            except (ReviewError, ConversionError) as exc:
                code = 400
                return _bad_request(str(exc))
            return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                      "response": decision.response()})
        finally:
            metrics.in_flight.labels(label).dec()
            metrics.requests.labels(label, str(code)).inc()
            metrics.latency.labels(label).observe(time.perf_counter() - started)

    app = web.Application(client_max_size=MAX_BODY, middlewares=list(middlewares))
    app.router.add_post("/{action}/{group}/{plural}", review)
    add_health(app, recorder, metrics)
    return app


def add_health(app: web.Application, recorder: DecisionRecorder, metrics: WebhookMetrics) -> None:
    """`GET /healthz` (503 naming the reason while the recorder is down or stuck) and `GET /metrics`."""

    async def healthz(request: web.Request) -> web.Response:
        problem = recorder.problem()
        if problem:
            return web.Response(text=f"unhealthy: {problem}\n", status=503)
        return web.Response(text="ok")

    async def metrics_page(request: web.Request) -> web.Response:
        recorder.supervise()  # a look at the recorder on every scrape, besides the server's own
        metrics.recorder_backlog.set(recorder.pending())
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)


def build_metrics_app(recorder: DecisionRecorder, metrics: WebhookMetrics,
                      middlewares: tuple[Any, ...] = ()) -> web.Application:
    """The metrics port's application: `/metrics` and `/healthz` only, no request body accepted."""
    app = web.Application(client_max_size=1024, middlewares=list(middlewares))
    add_health(app, recorder, metrics)
    return app
