"""Set up OpenTelemetry tracing for one process: spans go to the database span store and, when
OTEL_EXPORTER_OTLP_ENDPOINT is set, to an OTLP collector too. OPSCONSOLE_TRACING=off leaves the API's
no-op tracer in place (zero cost: engine code checks `is_recording()` before doing span work).

The trace context travels in Celery task headers. Tasks are sent by name (`send_task`), and
opentelemetry-instrumentation-celery's publish hook loses track of (and never ends) its span when the task
is not registered in the sending process, so the publish side is ours (`_inject_before_publish`: a short
PRODUCER span whose context goes into the headers); the worker side (`task_prerun`: the `run/<task>` span
continuing that context) is the instrumentation's.
"""

from __future__ import annotations

import atexit
import os
import threading
from datetime import timedelta
from typing import Any

from celery import signals
from django.conf import settings
from opentelemetry import trace
from opentelemetry.propagate import inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from opsconsole.telemetry.spanstore import DatabaseSpanProcessor
from reconcilers.engine.sampling import ReconcileSampler, sampled_trace_id

_lock = threading.Lock()
_provider: TracerProvider | None = None
_store: DatabaseSpanProcessor | None = None


def tracing_enabled() -> bool:
    """Tracing is on unless OPSCONSOLE_TRACING says off."""
    return str(getattr(settings, "OPSCONSOLE_TRACING", "on")).lower() not in {"0", "off", "false", "no"}


def sample_ratio(service: str) -> float:
    """The share of root traces a process samples: every one in the web process (a person's request, always
    worth its trace), `OPSCONSOLE_TRACE_SAMPLE_RATIO` in the controller and the workers."""
    if service == "opsconsole-web":
        return 1.0
    return float(getattr(settings, "OPSCONSOLE_TRACE_SAMPLE_RATIO", 1.0))


def tracing_setup(service: str, *, store_interval: float = 0.5) -> TracerProvider | None:
    """Install this process's TracerProvider once (later calls return it); None when tracing is off. Traces are
    head-sampled (reconcilers.engine.sampling: `sample_ratio`, errors, slow runs and manual requests kept)."""
    global _provider, _store
    with _lock:
        if _provider is not None and getattr(_provider, "_opsconsole_pid", None) == os.getpid():
            return _provider
        if not tracing_enabled():
            return None
        provider = TracerProvider(resource=Resource.create({"service.name": service}),
                                  sampler=ReconcileSampler(sample_ratio(service)))
        hours = float(getattr(settings, "OPSCONSOLE_SPAN_RETENTION_HOURS", 168))
        _store = DatabaseSpanProcessor(retention=timedelta(hours=hours), interval=store_interval)
        provider.add_span_processor(_store)
        endpoint = getattr(settings, "OTEL_EXPORTER_OTLP_ENDPOINT", None)
        if endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # short export timeout: a collector that does not answer must not hold shutdown up
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=3), export_timeout_millis=3000))
        provider._opsconsole_pid = os.getpid()  # type: ignore[attr-defined]
        trace.set_tracer_provider(provider)
        # set_tracer_provider refuses a second provider (e.g. after fork); make ours current regardless.
        trace._TRACER_PROVIDER = provider  # type: ignore[attr-defined]
        _provider = provider
        signals.before_task_publish.connect(_inject_before_publish, weak=False, dispatch_uid="opsconsole-otel-pub")
        atexit.register(_shutdown_quietly, provider)
        return provider


def tracing_shutdown() -> None:
    """Flush and remove this process's provider, back to the no-op tracer (tests; a clean exit does it too)."""
    global _provider, _store
    with _lock:
        provider, _provider, _store = _provider, None, None
        signals.before_task_publish.disconnect(dispatch_uid="opsconsole-otel-pub")
        trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    if provider is not None:
        _shutdown_quietly(provider)


def _shutdown_quietly(provider: TracerProvider) -> None:
    try:
        provider.shutdown()
    except Exception:  # noqa: S110 - on the way out, never an error
        pass


def span_store() -> DatabaseSpanProcessor | None:
    """This process's database span processor, when tracing is set up (tests flush it)."""
    return _store


def current_trace_id() -> str:
    """The current span's trace id (32 hex digits), '' when not tracing or not sampled (no span of it is
    stored)."""
    return sampled_trace_id(trace.get_current_span())


def _inject_before_publish(sender: Any = None, headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Publish side: inside a recording span, a PRODUCER span `send <task>` whose context goes in the headers."""
    if headers is None or not trace.get_current_span().is_recording():
        return
    name = sender if isinstance(sender, str) else getattr(sender, "name", "task")
    tracer = trace.get_tracer("opsconsole.celery")
    with tracer.start_as_current_span(f"send {name}", kind=trace.SpanKind.PRODUCER) as span:
        span.set_attribute("messaging.system", "celery")
        span.set_attribute("messaging.message.id", str(headers.get("id", "")))
        inject(headers)


def celery_instrument() -> None:
    """Worker side: the `run/<task>` span continues the context found in the task headers. The
    instrumentation's own publish hooks are taken off (ours injects; see the module docstring)."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
    signals.before_task_publish.disconnect(instrumentor._trace_before_publish)
    signals.after_task_publish.disconnect(instrumentor._trace_after_publish)


def django_instrument() -> None:
    """A server span per Django request (the web process; the health probes and /metrics left out)."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(excluded_urls="healthz,readyz,metrics")


def django_uninstrument() -> None:
    """Undo django_instrument (tests)."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
